"""TileLang's ``tilelang.intrinsics`` (``tilelang.cuda.intrinsics`` in TileLang's newer
layout, ``tilejit/tilelang/cuda/intrinsics``): the hand-written MMA path's emitter
(``TensorCoreIntrinEmitter``, defined in ``tilejit/language/mma_emitter.py``), its lane
maps (``get_ldmatrix_offset``, ``mma_store_index_map``, ``get_mma_micro_size``), and the
swizzle helpers of the user layouts (``tilejit/language/layout.py``)."""
from __future__ import annotations

from tilejit.language.layout import get_swizzle_layout, make_mma_swizzle_layout
from tilejit.language.mma_emitter import (TensorCoreIntrinEmitter, get_ldmatrix_offset,
                                          get_mma_micro_size, mma_store_index_map)
from tilejit.language.compat import module_getattr

__all__ = ["TensorCoreIntrinEmitter", "get_ldmatrix_offset", "get_mma_micro_size",
           "get_swizzle_layout", "make_mma_swizzle_layout", "mma_store_index_map"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.intrinsics", __name__,
    "of TileLang's intrinsics tilejit has TensorCoreIntrinEmitter (mma.sync) and its layout "
    "helpers")

"""TileLang's ``tilelang.intrinsics.utils``: the MMA helpers tilejit has
(``tilejit/language/mma_emitter.py``, ``tilejit/language/layout.py``)."""
from tilejit.language.layout import get_swizzle_layout, make_mma_swizzle_layout
from tilejit.language.mma_emitter import (get_ldmatrix_offset, get_mma_micro_size,
                                          mma_store_index_map)
from tilejit.language.compat import module_getattr

__all__ = ["get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout",
           "make_mma_swizzle_layout", "mma_store_index_map"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.intrinsics.utils", __name__,
    "of TileLang's MMA layout helpers tilejit has the ldmatrix offsets, the micro sizes and the"
    " swizzles")

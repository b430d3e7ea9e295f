"""TileLang's ``tilelang.cuda.intrinsics`` (``tilelang.intrinsics`` before TileLang moved
its backends into packages): the same names as ``tilejit/tilelang/intrinsics``."""
from tilejit.tilelang.intrinsics import (TensorCoreIntrinEmitter, get_ldmatrix_offset,
                                         get_mma_micro_size, get_swizzle_layout,
                                         make_mma_swizzle_layout, mma_store_index_map)
from tilejit.language.compat import module_getattr

__all__ = ["TensorCoreIntrinEmitter", "get_ldmatrix_offset", "get_mma_micro_size",
           "get_swizzle_layout", "make_mma_swizzle_layout", "mma_store_index_map"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.cuda.intrinsics", __name__,
    "of TileLang's CUDA intrinsics tilejit has TensorCoreIntrinEmitter (mma.sync) and its "
    "layout helpers")

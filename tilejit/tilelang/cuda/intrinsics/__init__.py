"""TileLang's ``tilelang.cuda.intrinsics`` (``tilelang.intrinsics`` before TileLang moved
its backends into packages): the same names as ``tilejit/tilelang/intrinsics``."""
from tilejit.tilelang.intrinsics import (TensorCoreIntrinEmitter, get_ldmatrix_offset,
                                         get_mma_micro_size, get_swizzle_layout,
                                         make_mma_swizzle_layout, mma_store_index_map)

__all__ = ["TensorCoreIntrinEmitter", "get_ldmatrix_offset", "get_mma_micro_size",
           "get_swizzle_layout", "make_mma_swizzle_layout", "mma_store_index_map"]

"""TileLang's ``tilelang.cuda.intrinsics.layout``: the MMA layout helpers tilejit has."""
from tilejit.tilelang.cuda.intrinsics.layout.utils import (get_ldmatrix_offset,
                                                           get_mma_micro_size,
                                                           get_swizzle_layout,
                                                           make_mma_swizzle_layout,
                                                           mma_store_index_map)
from tilejit.language.compat import module_getattr

__all__ = ["get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout",
           "make_mma_swizzle_layout", "mma_store_index_map"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.cuda.intrinsics.layout", __name__,
    "of TileLang's MMA layouts tilejit has the ldmatrix offsets, the micro sizes and the "
    "swizzles TensorCoreIntrinEmitter uses")

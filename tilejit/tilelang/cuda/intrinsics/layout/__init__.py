"""TileLang's ``tilelang.cuda.intrinsics.layout``: the MMA layout helpers tilejit has."""
from tilejit.tilelang.cuda.intrinsics.layout.utils import (get_ldmatrix_offset,
                                                           get_mma_micro_size,
                                                           get_swizzle_layout,
                                                           make_mma_swizzle_layout,
                                                           mma_store_index_map)

__all__ = ["get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout",
           "make_mma_swizzle_layout", "mma_store_index_map"]

"""TileLang's ``tilelang.cuda.intrinsics.layout.mma_layout``: the shared-memory swizzle
(``get_swizzle_layout``, ``make_mma_swizzle_layout``: ``tilejit/language/layout.py``) and
the store map of the C fragment (``tilejit/language/mma_emitter.py``)."""
from tilejit.language.layout import get_swizzle_layout, make_mma_swizzle_layout
from tilejit.language.mma_emitter import mma_store_index_map
from tilejit.language.compat import module_getattr

mma_store_32x8_to_shared_16x16_layout = mma_store_index_map

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout",
           "mma_store_32x8_to_shared_16x16_layout"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.cuda.intrinsics.layout.mma_layout", __name__,
    "of TileLang's MMA layouts tilejit has the swizzles and mma_store_index_map "
    "TensorCoreIntrinEmitter uses")

"""TileLang's ``tilelang.intrinsics.utils``: the MMA helpers tilejit has
(``tilejit/language/mma_emitter.py``)."""
from tilejit.language.mma_emitter import get_mma_micro_size, mma_store_index_map

__all__ = ["get_mma_micro_size", "mma_store_index_map"]

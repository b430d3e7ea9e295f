"""TileLang's ``tilelang.cuda.intrinsics.sparse_layout``: the compressed form of a 2:4
sparse A that ``T.gemm_sp`` reads (``language/sparse.py``)."""
from tilejit.language.sparse import GROUP_CONFIG, get_e_factor, get_e_replicate_factor

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]

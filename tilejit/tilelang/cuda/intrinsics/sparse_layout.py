"""TileLang's ``tilelang.cuda.intrinsics.sparse_layout``: the compressed form of a 2:4
sparse A that ``T.gemm_sp`` reads (``language/sparse.py``)."""
from tilejit.language.sparse import GROUP_CONFIG, get_e_factor, get_e_replicate_factor
from tilejit.language.compat import module_getattr

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.cuda.intrinsics.sparse_layout", __name__,
    "of TileLang's sparse layouts tilejit has GROUP_CONFIG, get_e_factor and "
    "get_e_replicate_factor")

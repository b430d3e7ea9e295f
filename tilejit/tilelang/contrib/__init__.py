"""TileLang's ``tilelang.contrib``: the helpers its programs import (``nvcc``'s
compute-capability queries). Its source compilers (nvcc, NVRTC, hipcc) are not part of
tilejit, which emits PTX itself."""
from tilejit.language.compat import module_getattr

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.contrib", __name__,
    "TileLang's compiler wrappers run nvcc, hipcc or a C compiler, and tilejit emits PTX itself"
    " (contrib.nvcc's names are refused one by one)")

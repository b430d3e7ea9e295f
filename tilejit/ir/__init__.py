"""What the tile passes decide about a kernel, as plain Python data (no Numba):
the tiles it allocates (``plan``), how a ``T.gemm`` is spread over warps
(``gemm_plan``) and how layouts turn into index arithmetic (``addressing``); and the
names the front end and the passes insert into the device program, each declared once
with the stub Numba types and lowers (``markers``); what a TMA copy moves
(``tma_box``); the ``KernelConfig`` lowering rules read (``kernel_config``). May import
``language``, ``layouts``, ``target``, ``errors``."""
from tilejit.language.compat import module_getattr

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.ir", __name__,
    "TileLang's TVM IR nodes (tilejit.ir is tilejit's own compiler IR, another module)")

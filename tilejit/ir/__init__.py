"""What the tile passes decide about a kernel, as plain Python data (no Numba):
the tiles it allocates (``plan``), how a ``T.gemm`` is spread over warps
(``gemm_plan``) and how layouts turn into index arithmetic (``addressing``); and the
names the front end and the passes insert into the device program, each declared once
with the stub Numba types and lowers (``markers``); what a TMA copy moves
(``tma_box``); the ``KernelConfig`` lowering rules read (``kernel_config``). May import
``language``, ``layouts``, ``target``, ``errors``."""

"""TileLang's ``tilelang.cuda``: of its CUDA backend package, tilejit has the hand-written
MMA path's ``tilelang.cuda.intrinsics`` (``intrinsics/``) and the CUDA dialect's
``tilelang.cuda.language`` (TileLang's common language with its CUDA extensions, which
tilejit's ``tilejit.language`` holds: the same module); reading any other name says it
is not built."""
from __future__ import annotations

import sys

from tilejit import language
from tilejit.language.compat import module_getattr
from tilejit.tilelang.cuda import intrinsics

# `from tilelang.cuda import language as T` and `import tilelang.cuda.language as T`
sys.modules[__name__ + ".language"] = language

__all__ = ["intrinsics", "language"]


__getattr__ = module_getattr(
    "tilelang.cuda", __name__,
    "of TileLang's CUDA backend package tilejit has tilelang.cuda.intrinsics "
    "(TensorCoreIntrinEmitter and its layout helpers) and tilelang.cuda.language (the "
    "language itself)")

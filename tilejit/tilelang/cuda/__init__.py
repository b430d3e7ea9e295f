"""TileLang's ``tilelang.cuda``: of its CUDA backend package, tilejit has the hand-written
MMA path's ``tilelang.cuda.intrinsics`` (``intrinsics/``); reading any other name says it
is not built."""
from __future__ import annotations

from tilejit.language.compat import module_getattr
from tilejit.tilelang.cuda import intrinsics

__all__ = ["intrinsics"]


__getattr__ = module_getattr(
    "tilelang.cuda", __name__,
    "of TileLang's CUDA backend package tilejit has tilelang.cuda.intrinsics "
    "(TensorCoreIntrinEmitter and its layout helpers)")

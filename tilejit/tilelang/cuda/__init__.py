"""TileLang's ``tilelang.cuda``: of its CUDA backend package, tilejit has the hand-written
MMA path's ``tilelang.cuda.intrinsics`` (``intrinsics/``); reading any other name says it
is not built."""
from __future__ import annotations

import sys

from tilejit.language.compat import NotSupportedError
from tilejit.tilelang.cuda import intrinsics

__all__ = ["intrinsics"]


def __getattr__(name):
    if name.startswith("__") and name.endswith("__") or f"{__name__}.{name}" in sys.modules:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise NotSupportedError(
        f"tilelang.cuda.{name} is not supported by tilejit: of TileLang's CUDA backend "
        "package tilejit has tilelang.cuda.intrinsics (TensorCoreIntrinEmitter and its "
        "layout helpers); see docs/tilelang-compat.md")

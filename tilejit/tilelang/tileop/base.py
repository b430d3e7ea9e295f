"""TileLang's ``tilelang.tileop.base``: ``GemmWarpPolicy`` is ``T.GemmWarpPolicy`` (TileLang
defines the enum here and re-exports it as ``T.GemmWarpPolicy``; programs import either)."""
from __future__ import annotations

from tilejit.language.compat import module_getattr
from tilejit.language.tiles import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]


__getattr__ = module_getattr(
    "tilelang.tileop.base", __name__,
    "of TileLang's tileop.base tilejit has GemmWarpPolicy")

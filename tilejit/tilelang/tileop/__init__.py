"""TileLang's ``tilelang.tileop``: of its tile operators (TVM nodes), tilejit has the
warp policy enum ``tileop.base.GemmWarpPolicy`` (``T.GemmWarpPolicy``, which programs
import from here); reading any other name says it is not built."""
from __future__ import annotations

from tilejit.language.compat import module_getattr
from tilejit.tilelang.tileop import base
from tilejit.tilelang.tileop.base import GemmWarpPolicy

__all__ = ["base", "GemmWarpPolicy"]


__getattr__ = module_getattr(
    "tilelang.tileop", __name__,
    "of TileLang's tile operators (TVM nodes: Gemm, GemmSP) tilejit has "
    "tileop.base.GemmWarpPolicy, T.GemmWarpPolicy")

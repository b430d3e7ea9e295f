"""TileLang's ``tilelang.transform``: the names its programs import from it.

``simplify_prim_func`` simplifies a program's TVM IR, which changes no result; tilejit
compiles the program's Python and simplifies while lowering, so the decorator returns
what it decorates. ``PassConfigKey`` is TileLang's (``tilejit.PassConfigKey``). The TVM
passes themselves (``ThreadSync``, ``LowerAccessPtr``, ``MergeIfStmt``, ...) transform
TVM IR modules, which tilejit does not build: reading one raises ``NotSupportedError``."""
from __future__ import annotations

import sys

from tilejit.language.compat import NotSupportedError
from tilejit.tilelang.jit import PassConfigKey


def simplify_prim_func(func):
    """``@simplify_prim_func`` on a function that returns a ``T.prim_func`` (or on the
    prim_func itself): the program unchanged."""
    return func


def __getattr__(name):
    if name.startswith("__") or f"{__name__}.{name}" in sys.modules:
        raise AttributeError(name)      # (a submodule being imported: Python finds it)
    raise NotSupportedError(f"tilelang.transform.{name} is not supported by tilejit: it is "
                            f"a pass over TileLang's TVM IR, which tilejit does not build "
                            f"(it compiles the program's Python itself); see "
                            f"docs/tilelang-compat.md")


__all__ = ["simplify_prim_func", "PassConfigKey"]

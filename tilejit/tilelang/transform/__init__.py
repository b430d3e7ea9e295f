"""TileLang's ``tilelang.transform``: the names its programs import from it.

``simplify_prim_func`` simplifies a program's TVM IR, which changes no result; tilejit
compiles the program's Python and simplifies while lowering, so the decorator returns
what it decorates. ``PassConfigKey`` is TileLang's (``tilejit.PassConfigKey``). The TVM
passes themselves (``ThreadSync``, ``LowerAccessPtr``, ``MergeIfStmt``, ...) transform
TVM IR modules, which tilejit does not build: reading one raises ``NotSupportedError``."""
from __future__ import annotations

from tilejit.language.compat import module_getattr
from tilejit.tilelang.jit import PassConfigKey


def simplify_prim_func(func):
    """``@simplify_prim_func`` on a function that returns a ``T.prim_func`` (or on the
    prim_func itself): the program unchanged."""
    return func


__getattr__ = module_getattr(
    "tilelang.transform", __name__,
    "it is a pass over TileLang's TVM IR, which tilejit does not build (it compiles the "
    "program's Python itself)")


__all__ = ["simplify_prim_func", "PassConfigKey"]

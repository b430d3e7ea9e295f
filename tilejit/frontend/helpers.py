"""Plain Python helpers a kernel calls, compiled inline as ``@T.macro``s.

TileLang runs a kernel's helper functions while it builds the kernel; tilejit compiles
them into it: a plain function of the user's that the kernel names (or picks from a
container at a compile-time index: ``passes/constant_subscripts.py``) becomes a
``T.macro``, and so do the user functions it calls in turn, over copies of their globals
(the module is not changed). Library functions are left alone; in simulation every
helper is an ordinary call."""
from __future__ import annotations

from types import FunctionType

from tilejit import language as T
from tilejit.frontend.references import user_function


def is_helper(value) -> bool:
    """A plain user function (not a library's, not already a macro)."""
    return isinstance(value, FunctionType) and user_function(value) is value


def as_macro(fn: FunctionType, done: dict | None = None) -> "T.macro":
    return T.macro(_inlinable(fn, {} if done is None else done))


def helpers_as_macros(namespace: dict, names) -> None:
    """Each of ``names`` bound to a helper in ``namespace`` made a macro."""
    done: dict = {}
    for name in names:
        if is_helper(namespace.get(name)):
            namespace[name] = as_macro(namespace[name], done)


def _inlinable(fn: FunctionType, done: dict) -> FunctionType:
    if fn in done:
        return done[fn]
    scope = dict(fn.__globals__)
    copy_ = FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy_.__kwdefaults__, copy_.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    copy_.__module__ = fn.__module__
    done[fn] = copy_
    for name in fn.__code__.co_names:
        if is_helper(scope.get(name)):
            scope[name] = T.macro(_inlinable(scope[name], done))
    return copy_

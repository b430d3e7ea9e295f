"""Objects of the user's passed to a ``@T.macro`` (or a plain helper), specialized away
before typing.

TileLang expands a macro while it builds the kernel, so any Python value may be passed
to one and read there as a compile-time constant: DeepSeek's TileKernels hand a frozen
dataclass of the output's format to ``get_sf_and_inv(amax, out_config, dtype)``, which
reads ``out_config.use_ue8m0`` in a Python ``if``. Numba types a macro's arguments, and
has no type for such an object ("Untyped global name"). A call that passes a global or
closure name bound to one (``_is_config_object``) calls instead a copy of the macro
without that parameter, its body reading the name as a global bound to the object, so
that its attribute chains fold as the kernel's own do (``attribute_chains.py``), and the
macros it passes the object on to are specialized in turn. One copy per macro and
object. Calls that pass the object by a local name (``c = cfg; f(c)``) are not followed.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import types

import numpy as np

from tilejit import language as T
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.references import LIBRARY_MODULES


def is_config_object(value) -> bool:
    """An instance of the user's that Numba has no type for and a macro may only read:
    a dataclass, a ``SimpleNamespace``, an object with attributes (not a module, class,
    function, array, tensor or a library's object)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, tuple,
                                           list, dict, set, frozenset, np.generic,
                                           np.ndarray, types.ModuleType, type)):
        return False
    if callable(value):
        return False
    module = type(value).__module__ or ""
    if module.split(".")[0] in LIBRARY_MODULES and not isinstance(value, types.SimpleNamespace):
        return False
    return (dataclasses.is_dataclass(value) or isinstance(value, types.SimpleNamespace)
            or hasattr(value, "__dict__") or hasattr(type(value), "__slots__"))


def object_parameters(fn, call: ast.Call, value_of) -> dict[str, object] | None:
    """{parameter: object} for the arguments of ``call`` (to ``fn``) that name a config
    object (``value_of(name)``: the object a name is bound to, or None); None when there
    are none or the call's form is not followed (``*args``, ``**kwargs``)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD)]
    found = {}
    for i, arg in enumerate(call.args):
        if i < len(positional) and isinstance(arg, ast.Name):
            value = value_of(arg.id)
            if is_config_object(value):
                found[positional[i]] = value
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.arg in sig.parameters and \
                sig.parameters[kw.arg].kind != inspect.Parameter.POSITIONAL_ONLY:
            value = value_of(kw.value.id)
            if is_config_object(value):
                found[kw.arg] = value
    return found or None


def without_parameters(call: ast.Call, fn, fixed, callee: str) -> ast.Call:
    """``call`` to ``callee`` with the arguments of ``fixed``'s parameters left out."""
    positional = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = [a for i, a in enumerate(call.args)
            if not (i < len(positional) and positional[i] in fixed)]
    keywords = [k for k in call.keywords if k.arg not in fixed]
    return ast.copy_location(ast.Call(ast.Name(callee, ast.Load()), args, keywords), call)


def drop_parameters(fdef: ast.FunctionDef, fn, fixed) -> tuple:
    """Take ``fixed``'s parameters out of ``fdef``'s signature (in place); the function's
    positional defaults and keyword-only defaults without theirs."""
    a = fdef.args
    positional = a.posonlyargs + a.args
    n_defaults = len(a.defaults)
    defaulted = [p.arg for p in positional[len(positional) - n_defaults:]]
    a.defaults = [d for p, d in zip(defaulted, a.defaults) if p not in fixed]
    a.posonlyargs = [p for p in a.posonlyargs if p.arg not in fixed]
    a.args = [p for p in a.args if p.arg not in fixed]
    kept = [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if p.arg not in fixed]
    a.kwonlyargs, a.kw_defaults = [p for p, _ in kept], [d for _, d in kept]
    defaults = fn.__defaults__
    if defaults:
        names = [p for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        named = [p.name for p in names][len(names) - len(defaults):]
        defaults = tuple(d for p, d in zip(named, defaults) if p not in fixed) or None
    kwdefaults = {k: v for k, v in (fn.__kwdefaults__ or {}).items() if k not in fixed}
    return defaults, kwdefaults or None


def callee_function(value):
    """The function a macro or plain helper runs, or None."""
    if isinstance(value, T.macro):
        return value.func if isinstance(value.func, types.FunctionType) else None
    return value if is_helper(value) else None

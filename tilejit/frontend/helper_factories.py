"""A helper that a factory makes, called in the kernel: ``make()(args)``.

TileLang's dequantizing GEMMs pick their ``@T.macro`` so, from a function of the
program's factory that builds and returns it::

    def get_simple_dequant_func(in_dtype="fp4", out_dtype=T.bfloat16):
        @T.macro
        def simple_dequant_bf16_fp4(B_shared, B_dequantize_shared): ...
        return simple_dequant_bf16_fp4

    with T.Kernel(...):
        get_simple_dequant_func()(B_shared, B_dequantize_shared)

The factory's call is made once, when the kernel is defined, with its arguments'
compile-time values (constants, and names of the kernel's globals and closure that it
does not assign); the helper it returns is bound in the kernel's namespace under a name
of its own (``__tj_made_<factory><n>``, kept by ``KernelSource.resolve``) and the call
names it, so the helper is then inlined or compiled as any helper the kernel names. A
factory that raises, or returns something a kernel cannot call, is a ``CompileError`` at
the call; a factory not known when the kernel is defined (defined below it) is left to
the compiler's own error.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static

_UNKNOWN = object()


def _value(node, ks, assigned):
    if isinstance(node, ast.Constant):
        return node.value
    names = {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)}
    if names & assigned or not isinstance(node, (ast.Name, ast.Attribute)):
        return _UNKNOWN
    value = resolve_static(node, ks.namespace)
    return _UNKNOWN if value is None and not (isinstance(node, ast.Name)
                                               and node.id == "None") else value


def bind_made_helpers(ks: KernelSource) -> None:
    assigned = assigned_names(ks.tree)
    count = 0
    for call in syntax.walk(ks.tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Call)):
            continue
        inner = call.func
        factory = resolve_static(inner.func, ks.namespace)
        if not is_helper(factory):
            continue
        args = [_value(a, ks, assigned) for a in inner.args]
        kwargs = {k.arg: _value(k.value, ks, assigned) for k in inner.keywords}
        if any(k is None for k in kwargs) or any(
                isinstance(a, ast.Starred) for a in inner.args):
            raise ks.error(f"`{ast.unparse(inner)}`: a factory of a helper the kernel calls "
                           f"takes plain arguments", call)
        if _UNKNOWN in args or _UNKNOWN in kwargs.values():
            raise ks.error(f"`{ast.unparse(inner)}` makes the helper the kernel calls here, "
                           f"once, when the kernel is defined: its arguments must be known "
                           f"then (constants, or names of the program's that the kernel "
                           f"does not assign)", call)
        try:
            made = factory(*args, **kwargs)
        except Exception as e:          # the factory's own error, at the kernel's line
            raise ks.error(f"`{ast.unparse(inner)}`, which makes the helper the kernel "
                           f"calls here, raised {type(e).__name__}: {e}", call) from e
        if not (isinstance(made, T.macro) or is_helper(made)):
            raise ks.error(f"`{ast.unparse(inner)}` gives {type(made).__name__!s} "
                           f"{made!r:.60}, not a helper function or @T.macro the kernel can "
                           f"call", call)
        name = f"__tj_made_{factory.__name__}{count}"
        count += 1
        ks.made[name] = ks.namespace[name] = made
        call.func = ast.copy_location(ast.Name(name, ast.Load()), inner)

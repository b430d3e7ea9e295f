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
names it, so the helper is then inlined or compiled as any helper the kernel names. The
values it was made with are kept (``KernelSource.made_from``): when the kernel resolves
its names (its first compilation), an argument or the factory bound to another value
since is a ``CompileError`` at the call (the helper was made with the old one), and the
disk cache keys the made helpers themselves (``runtime/kernel_cache.key_of``). A call
whose factory or arguments are not known when the kernel is defined (a constexpr, a
name defined below the kernel, an expression), a factory that raises, or one that
returns something other than a helper is left as written: compiled as before, or the
compiler's own error.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static

_UNKNOWN = object()


def _value(node, namespace, assigned):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and isinstance(namespace.get(node.id), T.Symbol):
        # a shape symbol (`LEN = T.dynamic("LEN")` of the program's factory): the kernel
        # binds its name from a tensor's extent, and the helper made with the symbol reads
        # it by that name (RWKV-7's `ln_macro(LEN, C)` launching `T.Kernel(LEN)`)
        return namespace[node.id]
    names = {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)}
    if names & assigned or not isinstance(node, (ast.Name, ast.Attribute)):
        return _UNKNOWN
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id not in namespace:
        return _UNKNOWN                 # defined below the kernel, or a builtin
    value = resolve_static(node, namespace)
    return _UNKNOWN if value is None and not _names_none(node, namespace) else value


def _names_none(node, namespace) -> bool:
    """Whether ``node`` (a name or attribute chain) is bound to None itself."""
    if isinstance(node, ast.Name):
        return node.id in namespace and namespace[node.id] is None
    base = resolve_static(node.value, namespace)
    return base is not None and hasattr(base, node.attr) and getattr(base, node.attr) is None


def _arguments(inner, namespace, assigned):
    """(args, kwargs) of a factory's call, or None where one is not known."""
    if any(k.arg is None for k in inner.keywords) or any(
            isinstance(a, ast.Starred) for a in inner.args):
        return None
    args = [_value(a, namespace, assigned) for a in inner.args]
    kwargs = {k.arg: _value(k.value, namespace, assigned) for k in inner.keywords}
    if _UNKNOWN in args or _UNKNOWN in kwargs.values():
        return None
    return args, kwargs


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
        arguments = _arguments(inner, ks.namespace, assigned)
        if arguments is None:
            continue
        try:
            made = factory(*arguments[0], **arguments[1])
        except Exception:       # left as written: the compiler's own error, at its use
            continue
        if not (isinstance(made, T.macro) or is_helper(made)):
            continue
        name = f"__tj_made_{factory.__name__}{count}"
        count += 1
        ks.made[name] = ks.namespace[name] = made
        ks.made_from[name] = (copy.deepcopy(inner), factory, arguments)
        call.func = ast.copy_location(ast.Name(name, ast.Load()), inner)


def check_made_helpers(ks: KernelSource) -> None:
    """At ``resolve``: each made helper's factory and arguments are still what they were
    when the kernel was defined; else a CompileError at the call."""
    assigned = assigned_names(ks.tree)
    for inner, factory, (args, kwargs) in ks.made_from.values():
        now = _arguments(inner, ks.namespace, assigned)
        same = now is not None and resolve_static(inner.func, ks.namespace) is factory and \
            len(now[0]) == len(args) and all(_same(a, b) for a, b in zip(now[0], args)) and \
            now[1].keys() == kwargs.keys() and all(_same(now[1][k], v)
                                                   for k, v in kwargs.items())
        if not same:
            raise ks.error(f"`{ast.unparse(inner)}` made the helper the kernel calls here when "
                           f"the kernel was defined, and its factory or arguments are bound "
                           f"to other values now: the helper would keep the old ones; define "
                           f"the kernel after setting them (or decorate it again)", inner)


def _same(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:       # an array's ==: not one bool
        return False

"""Layouts a kernel's body builds and names (``a_layout = T.Fragment(...)``, or ``=
_mma_a_layout()`` through a helper of the program's), computed when the kernel is
parsed.

TileLang runs such a statement while it builds the kernel: the name holds a layout
object, which ``T.annotate_layout({frag: a_layout})`` then reads. tilejit's device code
has no layout values, so a statement that binds a name once to a ``T.Layout`` /
``T.Fragment`` made of compile-time values (the program's globals and closure, not
the kernel's own variables) is evaluated here, its name read as a global bound to the
layout (``KernelSource.made``), and the statement dropped. One whose value needs the
kernel's variables, or that fails to evaluate, is left as it is (the later passes'
errors name it)."""
from __future__ import annotations

import ast
import types
from collections import Counter

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static

_MAKERS = (T.Layout, T.Fragment)


def bind_layout_values(ks: KernelSource) -> None:
    stores = Counter(n.id for n in syntax.walk(ks.tree)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    local = assigned_names(ks.tree)
    renamed = {}
    for block in list(_statement_lists(ks.tree)):
        kept = []
        for stmt in block:
            name = _layout_name(stmt, stores)
            value = name and _evaluated(stmt.value, ks.namespace, local)
            if value is None:
                kept.append(stmt)
                continue
            fresh = f"__tj_layout_{name}"
            ks.made[fresh] = ks.namespace[fresh] = value
            renamed[name] = fresh
        if len(kept) != len(block):
            block[:] = kept or [ast.Pass()]
    if renamed:
        for n in syntax.walk(ks.tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in renamed:
                n.id = renamed[n.id]


def _statement_lists(tree):
    for node in syntax.walk(tree):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt) \
                    and node is not tree:
                yield block


def _layout_name(stmt, stores) -> str | None:
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
            isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
        return None
    name = stmt.targets[0].id
    return name if stores[name] == 1 else None


def _evaluated(call: ast.Call, namespace: dict, local: set):
    """The layout ``call`` makes, or None (not a layout maker, reads the kernel's
    variables, or fails)."""
    fn = resolve_static(call.func, namespace)
    if fn not in _MAKERS and not (is_helper(fn) and _names_a_maker(fn)):
        return None
    params = {a.arg for n in syntax.walk(call) if isinstance(n, ast.Lambda)
              for a in n.args.args}
    if any(isinstance(n, ast.Name) and n.id in local and n.id not in params
           for n in syntax.walk(call)):
        return None
    try:
        value = eval(compile(syntax.fix_missing_locations(ast.Expression(call)),  # noqa: S307
                             "<kernel layout>", "eval"), dict(namespace))
    except Exception:   # noqa: BLE001 - left for the later passes to report
        return None
    return value if isinstance(value, _MAKERS) else None


def _names_a_maker(fn: types.FunctionType) -> bool:
    """Whether a helper's code reads ``T.Layout`` or ``T.Fragment`` (by any name)."""
    scope = current_namespace(fn)
    names = set(fn.__code__.co_names)
    for const in fn.__code__.co_consts:
        if isinstance(const, types.CodeType):
            names |= set(const.co_names)
    return any(scope.get(n) in _MAKERS for n in names) or any(
        getattr(scope.get(n), name, None) in _MAKERS
        for n in names for name in ("Layout", "Fragment"))

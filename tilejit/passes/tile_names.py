"""Pass: a tile name allocated again (``ol = T.alloc_fragment(...)`` in two loops' bodies,
as vllm's mHC kernel writes it) names a new tile from there on, as Python rebinds it:
each allocation after the first gets a name of its own (``__tj_re1_ol``, shown as ``ol``
in errors), and the uses after it in source order take that name up to the next
allocation. A name allocated under an ``if`` (a tile of one branch or the other) is left
as written (``tile_allocation.py`` reports it)."""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit.frontend.source import resolve_static

_ALLOCATIONS = (T.alloc_shared, T.alloc_fragment, T.alloc_local, T.alloc_var, T.alloc_reducer,
                T.alloc_barrier)


def rename_reallocated_tiles(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    allocations: dict[str, list] = {}
    conditional = set()
    for node, inside_if in _statements(fdef.body, False):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                resolve_static(node.value.func, ctx.namespace) in _ALLOCATIONS:
            allocations.setdefault(node.targets[0].id, []).append(node)
            if inside_if:
                conditional.add(node.targets[0].id)
    again = {name: stmts for name, stmts in allocations.items()
             if len(stmts) > 1 and name not in conditional}
    if not again:
        return fdef
    starts = {id(stmt.targets[0]): (name, k) for name, stmts in again.items()
              for k, stmt in enumerate(stmts)}
    current: dict[str, str] = {}
    for node in _in_source_order(fdef):
        if not isinstance(node, ast.Name) or node.id not in again:
            continue
        start = starts.get(id(node))
        if start is not None:
            name, k = start
            current[name] = name if k == 0 else f"__tj_re{k}_{name}"
            if k:
                ctx.shown_names[current[name]] = name
        node.id = current.get(node.id, node.id)
    return fdef


def _statements(body, inside_if):
    for stmt in body:
        yield stmt, inside_if
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _statements(inner, inside_if or isinstance(stmt, ast.If))


def _in_source_order(tree):
    """The nodes of ``tree`` depth first, an assignment's value before its targets (the
    order Python runs them in)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Assign):
            children = [node.value] + list(node.targets)
        elif isinstance(node, ast.AugAssign):
            children = [node.value, node.target]
        else:
            children = list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))

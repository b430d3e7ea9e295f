"""``T.copy`` of one element into or out of a ``T.alloc_var`` variable, as TileLang
lowers a copy between two scalar places to a plain store (a Mamba3 kernel writes
``D_var = T.alloc_var(T.float32); T.copy(D[i_h], D_var)``)::

    T.copy(D[i_h], d_var)    →   d_var = D[i_h]
    T.copy(d_var, Out[i])    →   Out[i] = d_var

One side a variable, the other an element (every index, no slice) or another variable;
anything else stays a tile copy (whose checks name what it needs)."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import names_bound_to, resolve_static


def rewrite_scalar_copies(ks) -> None:
    variables = names_bound_to(ks.tree, ks.namespace, (T.alloc_var,))
    if not variables:
        return
    for node in syntax.walk(ks.tree):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts):
                new = _as_store(stmt, variables, ks.namespace)
                if new is not None:
                    stmts[i] = ast.copy_location(new, stmt)


def _as_store(stmt, variables, namespace):
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and resolve_static(stmt.value.func, namespace) is T.copy):
        return None
    call = stmt.value
    if len(call.args) != 2 or call.keywords:
        return None
    src, dst = call.args
    if not (_variable(src, variables) or _variable(dst, variables)):
        return None
    if not all(_variable(x, variables) or _element(x) for x in (src, dst)):
        return None
    target = ast.Name(dst.id, ast.Store()) if isinstance(dst, ast.Name) else \
        ast.Subscript(dst.value, dst.slice, ast.Store())
    return ast.Assign([target], src)


def _variable(node, variables) -> bool:
    return isinstance(node, ast.Name) and node.id in variables


def _element(node) -> bool:
    """``X[i, j]``: a subscript with no slice (one element, every index given)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        return False
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return not any(isinstance(p, ast.Slice) for p in parts)


__all__ = ["rewrite_scalar_copies"]

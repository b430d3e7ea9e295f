"""Front end: a name a ``T.Parallel`` body binds once to an expression of the loop's
indices (``idx_1 = d``, ``col = j + 32``), read where the body indexes a fragment
(``cos_frag[idx_1]``), is that expression there: the fragment is indexed by the loop's
own indices, which the layout pass reads from the index itself (HunYuan's RoPE kernel
writes its indices so). Only a name the loop's body binds once, by a statement at its
top level (every iteration binds it before the reads after it), from an expression of
the loop's indices, constants and names the body never binds; the statement stays
(other uses read the name)."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import FRAGMENT_ALLOCATIONS, names_bound_to, resolve_static

_PURE = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
         ast.Load, ast.expr_context)


def inline_loop_aliases(fdef: ast.FunctionDef, namespace: dict) -> ast.FunctionDef:
    fragments = names_bound_to(fdef, namespace, FRAGMENT_ALLOCATIONS)
    if not fragments:
        return fdef
    for loop in [n for n in syntax.walk(fdef) if isinstance(n, ast.For) and isinstance(
            n.iter, ast.Call) and resolve_static(n.iter.func, namespace) is T.Parallel]:
        indices = {n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)}
        counts: dict[str, int] = {}         # the names the body binds, how many times
        for s in loop.body:
            for n in syntax.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    counts[n.id] = counts.get(n.id, 0) + 1
        aliases: dict[str, ast.expr] = {}
        for k, stmt in enumerate(loop.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name) and counts.get(stmt.targets[0].id) == 1 \
                    and _of_indices(stmt.value, indices, counts):
                aliases[stmt.targets[0].id] = stmt.value
                continue
            if aliases:
                loop.body[k] = _Substitute(aliases, fragments).visit(stmt)
    return fdef


def _of_indices(expr, indices, counts) -> bool:
    """An expression of the loop's indices (at least one), constants and names the
    loop's body never binds."""
    names = [n.id for n in syntax.walk(expr) if isinstance(n, ast.Name)]
    return all(isinstance(n, _PURE) for n in syntax.walk(expr)) and \
        any(n in indices for n in names) and \
        all(n in indices or n not in counts for n in names)


class _Substitute(syntax.NodeTransformer):
    """The aliases inside the indices of fragment subscripts."""

    def __init__(self, aliases, fragments):
        self.aliases, self.fragments = aliases, fragments

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.fragments:
            node.slice = _Replace(self.aliases).visit(node.slice)
        return node


class _Replace(syntax.NodeTransformer):
    def __init__(self, aliases):
        self.aliases = aliases

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            return ast.copy_location(copy.deepcopy(self.aliases[node.id]), node)
        return node

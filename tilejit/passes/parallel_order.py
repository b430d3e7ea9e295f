"""Pass: a ``T.Parallel`` whose fragments all take its indices in another order is
written in their order.

DeepSeek's fp8 indexer and sglang's kernels loop ``for h, i in T.Parallel(H, N)`` over a
fragment of shape ``(N, H)`` indexed ``logits[i, h]``. A T.Parallel's iterations are
independent, so the order its indices are listed in means nothing to the program; the
layout inference, though, reads a loop over a fragment as the fragment's own iteration
(its indices in order). Where every fragment of the loop's body indexed by all of the
loop's indices, each once, uses one and the same order, the loop's indices and extents
are permuted to it:

    for h, i in T.Parallel(H, N):          →     for i, h in T.Parallel(N, H):
        logits[i, h] = ...                            logits[i, h] = ...

A loop whose fragments disagree (``F_t[j, i] = F[i, j]``, a transpose through shared
memory: ``fragment_transposes.py``) is left as written.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static


def order_parallel_loops(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    fragments = {node.targets[0].id for node in syntax.walk(fdef)
                 if isinstance(node, ast.Assign) and len(node.targets) == 1
                 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                 and resolve_static(node.value.func, ctx.namespace) is T.alloc_fragment}
    if not fragments:
        return fdef
    for loop in [n for n in syntax.walk(fdef) if isinstance(n, ast.For)]:
        if not (isinstance(loop.iter, ast.Call) and isinstance(loop.target, ast.Tuple) and
                resolve_static(loop.iter.func, ctx.namespace) is T.Parallel):
            continue
        names = [t.id if isinstance(t, ast.Name) else None for t in loop.target.elts]
        if None in names or len(set(names)) != len(names) or \
                len(loop.iter.args) != len(names) or \
                any(isinstance(a, ast.Starred) for a in loop.iter.args):
            continue
        orders = set()
        for stmt in loop.body:
            for sub in syntax.walk(stmt):
                if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                        and sub.value.id in fragments):
                    continue
                elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                used = tuple(e.id if isinstance(e, ast.Name) else None for e in elts)
                if sorted(filter(None, used)) == sorted(names) and len(used) == len(names):
                    orders.add(used)
        if len(orders) != 1:
            continue
        order = orders.pop()
        if list(order) == names:
            continue
        perm = [names.index(n) for n in order]
        loop.target.elts = [loop.target.elts[k] for k in perm]
        loop.iter.args = [loop.iter.args[k] for k in perm]
    return fdef


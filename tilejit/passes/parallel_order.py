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
from tilejit.frontend.loop_fragments import fragment_names, fragment_subscripts, parallel_names


def order_parallel_loops(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    fragments = fragment_names(fdef, ctx.namespace)
    if not fragments:
        return fdef
    for loop in [n for n in syntax.walk(fdef) if isinstance(n, ast.For)]:
        names = parallel_names(loop, ctx.namespace)
        if names is None or len(names) < 2:
            continue
        orders = set()
        for _sub, _elts, used in fragment_subscripts(loop, fragments, names):
            if sorted(filter(None, used)) == sorted(names) and len(used) == len(names):
                orders.add(tuple(used))
        if len(orders) != 1:
            continue
        order = orders.pop()
        if list(order) == names:
            continue
        perm = [names.index(n) for n in order]
        loop.target.elts = [loop.target.elts[k] for k in perm]
        loop.iter.args = [loop.iter.args[k] for k in perm]
    return fdef

"""Pass: a fragment indexed in a ``T.Parallel`` loop at ``X * n + j`` (``j`` the loop's
index of extent n, ``X`` fixed in the loop: a serial loop's variable, a constant; or
another of the loop's indices, TileLang's composed index ``F[i * n + j]`` of a flat
fragment) is indexed through a view that splits that dimension in two.

DeepSeek's mHC kernel walks a (rows, 256) fragment four columns at a time:

    for jj in T.serial(64):                          xf_s = T.reshape(xf, (32, 64, 4))
        for i, j in T.Parallel(32, 4):          →    ...
            acc[i, j] += xf[i, jj * 4 + j] ** 2             acc[i, j] += xf_s[i, jj, j] ** 2

The view (``T.reshape`` after the fragment's allocation) is what the layout inference
already takes: a fragment indexed in part, the loop's indices in order and the other
positions fixed (``layout_inference.py``), its fixed positions held in slot digits of
each thread. Where the fragment's layout spreads ``X``'s digits over threads, that pass
says so at the line. Only whole splits are taken: ``n`` known at compile time, equal to
the loop's extent along ``j`` and dividing the dimension; any other index is left as
written (and reported there as before).
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static, statement_lists
from tilejit.ir.markers import LANGUAGE
from tilejit.passes.static_eval import NotStatic, StaticEval


def split_fragment_indices(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    fragments = _fragment_allocations(fdef, ctx)
    if not fragments:
        return fdef
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    views = {}                      # (fragment, position, n) -> view name
    for loop in [n for n in syntax.walk(fdef) if isinstance(n, ast.For)]:
        if not (isinstance(loop.iter, ast.Call) and
                resolve_static(loop.iter.func, ctx.namespace) is T.Parallel):
            continue
        names = [t.id for t in (loop.target.elts if isinstance(loop.target, ast.Tuple)
                                else [loop.target]) if isinstance(t, ast.Name)]
        extents = dict(zip(names, loop.iter.args))
        lets = _let_bindings(loop)
        for sub in [n for stmt in loop.body for n in syntax.walk(stmt)
                    if isinstance(n, ast.Subscript)]:
            if not (isinstance(sub.value, ast.Name) and sub.value.id in fragments):
                continue
            elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            for p, index in enumerate(elts):
                if isinstance(index, ast.Name) and index.id in lets:
                    index = lets[index.id]      # `k_idx = kb * 32 + c; F[k_idx]`
                split = _split(index, extents, set(names), static)
                if split is None:
                    continue
                fixed, var, n = split
                try:
                    whole = static.value(fragments[sub.value.id][1][p])
                except NotStatic:
                    continue
                if not isinstance(whole, int) or whole % n:
                    continue
                key = (sub.value.id, p, n)
                if key not in views:
                    views[key] = f"__tj_split_{sub.value.id}_{p}_{n}"
                    # errors name it as the reshape it is (the line quoted is the user's)
                    ctx.shown_names[views[key]] = _shown(sub.value.id, fragments, p, n,
                                                         static)
                sub.value = ast.Name(views[key], ast.Load())
                new = elts[:p] + [copy.deepcopy(fixed), ast.Name(var, ast.Load())] + \
                    elts[p + 1:]
                sub.slice = ast.Tuple(new, ast.Load())
                break                 # one split per subscript
    for (name, p, n), view in views.items():
        alloc, shape = fragments[name]
        dims = [copy.deepcopy(e) for e in shape]
        dims[p:p + 1] = [ast.BinOp(dims[p], ast.FloorDiv(), ast.Constant(n)), ast.Constant(n)]
        reshape = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "reshape", ast.Load())
        stmt = ast.Assign([ast.Name(view, ast.Store())],
                          ast.Call(reshape, [ast.Name(name, ast.Load()),
                                             ast.Tuple(dims, ast.Load())], []))
        block = next(b for b in statement_lists(fdef) if alloc in b)
        block.insert(block.index(alloc) + 1,
                     syntax.fix_missing_locations(ast.copy_location(stmt, alloc)))
    return fdef


def _shown(name, fragments, p, n, static) -> str:
    """``F.reshape(32, 64, 4)``: how errors show the view of F split at dimension p."""
    dims = []
    for k, e in enumerate(fragments[name][1]):
        try:
            v = static.value(e)
        except NotStatic:
            v = "…"
        dims += [v // n if isinstance(v, int) else "…", n] if k == p else [v]
    return f"{name}.reshape({', '.join(map(str, dims))})"


def _fragment_allocations(fdef, ctx) -> dict:
    """{name: (its `name = T.alloc_fragment(shape, ...)` statement, the shape's
    expressions)} of fragments allocated once with a literal shape or one extent (an
    expression that is not an int, a tuple's name, is not split where it is used)."""
    found, seen = {}, {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            seen[name] = seen.get(name, 0) + 1
            call = node.value
            if isinstance(call, ast.Call) and call.args and resolve_static(
                    call.func, ctx.namespace) is T.alloc_fragment:
                shape = call.args[0]      # (M, N), or one extent: (M * N), a name
                found[name] = (node, shape.elts if isinstance(shape, (ast.Tuple, ast.List))
                               else [shape])
    return {n: v for n, v in found.items() if seen[n] == 1}


def _let_bindings(loop) -> dict:
    """{name: expression} of the names a T.Parallel body binds once, at its top level, to an
    expression of names the body does not rebind (fla's `k_idx = k_blk * BK + k_i` before
    `g[k_idx]`): an index through such a name is split as the expression would be."""
    stores: dict[str, int] = {}
    for node in syntax.walk(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    indices = {t.id for t in targets if isinstance(t, ast.Name)}
    lets = {}
    for stmt in loop.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name) and stores[stmt.targets[0].id] == 1:
            used = {n.id for n in syntax.walk(stmt.value) if isinstance(n, ast.Name)}
            if not any(u in stores and u not in indices for u in used):
                lets[stmt.targets[0].id] = stmt.value
    return lets


def _split(index, extents, loop_names, static):
    """(X, j, n) for an index ``X * n + j`` / ``j + X * n`` (or ``n * X``) whose ``j`` is
    a loop index of extent n and whose X names none of the loop's indices or is another
    of them; else None."""
    if not (isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add)):
        return None
    for var, other in ((index.right, index.left), (index.left, index.right)):
        if not (isinstance(var, ast.Name) and var.id in extents and
                isinstance(other, ast.BinOp) and isinstance(other.op, ast.Mult)):
            continue
        for fixed, factor in ((other.left, other.right), (other.right, other.left)):
            names = {n.id for n in syntax.walk(fixed) if isinstance(n, ast.Name)}
            if names & loop_names and not (isinstance(fixed, ast.Name) and fixed.id != var.id):
                continue            # X a loop index itself (F[i * n + j]), or free of them
            if any(isinstance(n, ast.Name) and n.id in loop_names for n in syntax.walk(factor)):
                continue
            try:
                n, extent = static.value(factor), static.value(extents[var.id])
            except NotStatic:
                continue
            if isinstance(n, int) and n > 1 and n == extent:
                return fixed, var.id, n
    return None

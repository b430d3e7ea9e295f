"""Pass: a ``T.Parallel`` whose extents are known only at run time, as TileLang writes a
loop over the valid part of a buffer::

    span = T.min(valid_len, max_len)
    for i in T.Parallel(span):
        B[i] = A[i] - 1.0

A loop of compile-time extents is laid out (``lowering/parallel.py``, or a fragment's
layout); this one is the element loop the block's threads share, each taking every
``threads``-th iteration (a trip count every thread shares)::

    __tj_dp1_n = max(span, 0)                          # the extents, evaluated once
    __tj_sync()
    for __tj_dp1_r in range((__tj_dp1_n + threads - 1) // threads):
        __tj_dp1_e = __tj_dp1_r * threads + tid
        if __tj_dp1_e < __tj_dp1_n:
            i = __tj_dp1_e                             # row-major over several extents
            B[i] = A[i] - 1.0
    __tj_sync()

The block barriers before and after order its accesses with the statements around it,
whose elements other threads may hold (a loop of compile-time extents gives each
thread groups of consecutive elements; this one does not): the simulator runs the
statements one after another, and so then does the GPU. A body that indexes a fragment
or a local tile is a ``CompileError`` (a fragment's layout needs the loop's shape), as is
such a loop where not every thread of the block (or of its ``T.ws`` role) reaches it: a
branch on the thread index, or a role.
"""
from __future__ import annotations

import ast

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import ROLE_ATTR, SYNC, THREAD_INDEX
from tilejit.passes.barriers import thread_dependent_names
from tilejit.passes.dependence import dependent_names, reads_any
from tilejit.passes.static_eval import NotStatic, StaticEval


def _name(n: str, store=False):
    return ast.Name(n, ast.Store() if store else ast.Load())


def _product(exprs):
    out = exprs[0]
    for e in exprs[1:]:
        out = ast.BinOp(out, ast.Mult(), e)
    return out


class _Dynamic(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef, ctx.plan.tiles)
        shared = {n for n, t in ctx.plan.tiles.items() if t.kind == "shared"}
        # the names computed from the thread index (the barrier pass's reading)
        self.tainted = thread_dependent_names(fdef, shared) | {THREAD_INDEX}
        self.divergent = 0          # enclosing branches and loops not every thread takes
        self.exited = False         # a thread-dependent `return` came before
        self.fdef = fdef

    def _thread_dependent(self, expr) -> bool:
        return reads_any(expr, self.tainted)

    def _enclosing(self, node, divergent):
        self.divergent += divergent
        node = self.generic_visit(node)
        self.divergent -= divergent
        return node

    def visit_If(self, node):
        divergent = getattr(node, ROLE_ATTR, None) is not None or \
            self._thread_dependent(node.test)
        node = self._enclosing(node, divergent)
        if (divergent or self.divergent) and any(isinstance(n, ast.Return)
                                                 for n in syntax.walk(node)):
            self.exited = True      # the statements after it are not every thread's
        return node

    def visit_While(self, node):
        return self._enclosing(node, self._thread_dependent(node.test))

    def visit_For(self, node):
        it = node.iter
        if not (isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace)
                is T.Parallel and it.args and not it.keywords):
            return self._enclosing(node, self._thread_dependent(node.iter))
        try:
            values = [self.static.value(a) for a in it.args]
        except NotStatic:
            split = self._split(node)
            return self._rewrite(node) if split is None else self.visit(split)
        # an extent known when the kernel compiles (T.min(M, 128) of constants, a
        # tile's f.shape[0]): the literal, which the loop's typing and layout need
        it.args = [ast.copy_location(ast.Constant(int(v)), a)
                   if isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   and not isinstance(a, ast.Constant) else a
                   for a, v in zip(it.args, values)]
        # its iterations are spread over the threads: a loop inside is not every thread's
        return self._enclosing(node, True)

    def _split(self, loop):
        """``for i, j in T.Parallel(n, 64)`` (run-time extents first, compile-time ones
        after) whose fragments and local tiles are indexed by the compile-time indices
        only: ``for i in range(n): for j in T.Parallel(64)``, each thread running every
        leading iteration and the laid-out loop sharing the rest (the nests TileLang
        writes as ``T.Parallel(n)`` around ``T.Parallel(64)``); None for another loop."""
        args = loop.iter.args
        names = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        if len(names) != len(args) or not all(isinstance(n, ast.Name) for n in names):
            return None
        known = []
        for a in args:
            try:
                self.static.value(a)
                known.append(True)
            except NotStatic:
                known.append(False)
        k = known.index(True) if True in known else len(known)
        if k == 0 or not all(known[k:]):
            return None
        tiles = {n for n, t in self.ctx.plan.tiles.items() if t.kind in ("fragment", "local")}
        subs = [n for s in loop.body for n in syntax.walk(s) if isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name) and n.value.id in tiles]
        if not subs:
            return None                 # the element loop serves it
        body = ast.Module(body=loop.body, type_ignores=[])
        leading = dependent_names(body, {n.id for n in names[:k]})
        if any(reads_any(sub.slice, leading) for sub in subs):
            return None
        # a tile element every leading iteration stores must get one value from each,
        # known before the loop, in a statement of the body itself, and the tile is not
        # read in the body: then running the leading iterations one after another (here)
        # and all at once (the simulator) leave the same values
        into = {id(n) for n in subs}
        stores = [(n, t) for n in syntax.walk(body)
                  if isinstance(n, (ast.Assign, ast.AugAssign))
                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                  if id(t) in into]
        written = {t.value.id for _, t in stores}
        bound = {x.id for x in syntax.walk(body) if isinstance(x, ast.Name)
                 and isinstance(x.ctx, ast.Store)}
        top = {id(st) for st in loop.body}
        if any(isinstance(n, ast.AugAssign) or id(n) not in top
               or reads_any(n.value, leading | bound | written) for n, _ in stores):
            return None
        stored = {id(t) for _, t in stores}
        if any(isinstance(x, ast.Name) and x.id in written and not any(
                id(sub) in stored and sub.value is x for sub in subs)
               for x in syntax.walk(body)):
            return None                 # a stored tile read in the body
        rest = names[k:]
        target = rest[0] if len(rest) == 1 else ast.Tuple(list(rest), ast.Store())
        inner = ast.For(target, ast.Call(loop.iter.func, list(args[k:]), []), loop.body, [],
                        None)
        for name, extent in reversed(list(zip(names[:k], args[:k]))):
            inner = ast.For(_name(name.id, True), ast.Call(_name("range"), [extent], []),
                            [inner], [], None)
        return syntax.fix_missing_locations(ast.copy_location(inner, loop))

    def _rewrite(self, loop):
        text = f"`for ... in {ast.unparse(loop.iter)}`"
        names = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        if len(names) != len(loop.iter.args) or not all(isinstance(n, ast.Name)
                                                        for n in names):
            raise self.ctx.error(f"{text}: a T.Parallel names one index per extent", loop)
        for n in syntax.walk(loop):
            tile = self.ctx.plan.tiles.get(n.id) if isinstance(n, ast.Name) else None
            if tile is not None and tile.kind in ("fragment", "local"):
                raise self.ctx.layout_error(
                    f"{text}: a T.Parallel over extents known only at run time indexes "
                    f"{tile.kind} {n.id!r}, whose layout needs the loop's shape when the "
                    f"kernel compiles (not supported); loop over the tile's whole shape "
                    f"and select the elements with an `if`", loop)
        if self.divergent or self.exited:
            raise self.ctx.error(
                f"{text}: a T.Parallel over extents known only at run time where not every "
                f"thread reaches it (under a branch on the thread index or a T.ws role, "
                f"after a `return` some threads take) is not "
                f"supported: its threads share the loop with block barriers", loop)
        inner_only = {n.id for s in loop.body for n in syntax.walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        shared_names = sorted(inner_only & self._assigned_outside(loop))
        if shared_names:
            raise self.ctx.error(
                f"{text}: an iteration assigns {', '.join(shared_names)}, a name of the "
                f"thread's that the loop does not make: the iterations are spread over the "
                f"threads, each with its own (not supported; fold with T.alloc_reducer, or "
                f"write an element per iteration)", loop)
        k = self.ctx.number("dynamic_parallel")
        prefix = f"__tj_dp{k}"
        extents = [f"{prefix}_x{d}" for d in range(len(names))]
        n, r, e = f"{prefix}_n", f"{prefix}_r", f"{prefix}_e"
        threads = self.ctx.threads
        # an extent of 0 or below: no iterations (two negative ones make no positive count)
        out = [ast.Assign([_name(x, True)], ast.Call(_name("max"), [arg, ast.Constant(0)],
                                                     []))
               for x, arg in zip(extents, loop.iter.args)]
        out.append(ast.Assign([_name(n, True)], _product([_name(x) for x in extents])))
        tid = ast.Call(_name(THREAD_INDEX), [], [])
        if self.ctx.plan.role_threads:      # the block's index; a role's threads share it
            tid = ast.BinOp(tid, ast.Mod(), ast.Constant(self.ctx.plan.role_threads))
        first = ast.Assign([_name(e, True)], ast.BinOp(
            ast.BinOp(_name(r), ast.Mult(), ast.Constant(threads)), ast.Add(), tid))
        coords = []
        for d, v in enumerate(names):
            inner = [_name(x) for x in extents[d + 1:]]
            value = ast.BinOp(_name(e), ast.FloorDiv(), _product(inner)) if inner \
                else _name(e)
            if d:
                value = ast.BinOp(value, ast.Mod(), _name(extents[d]))
            coords.append(ast.Assign([_name(v.id, True)], value))
        self.divergent += 1                 # the body runs under the guard below
        body_stmts = []
        for st in loop.body:
            new = self.visit(st)
            body_stmts.extend(new if isinstance(new, list) else [new])
        self.divergent -= 1
        guard = ast.If(ast.Compare(_name(e), [ast.Lt()], [_name(n)]), coords + body_stmts,
                       [])
        trips = ast.BinOp(ast.BinOp(_name(n), ast.Add(), ast.Constant(threads - 1)),
                          ast.FloorDiv(), ast.Constant(threads))
        body = ast.For(_name(r, True), ast.Call(_name("range"), [trips], []),
                       [first, guard], [], None)
        sync = ast.Expr(ast.Call(_name(SYNC), [], []))
        out += [sync, body, ast.Expr(ast.Call(_name(SYNC), [], []))]
        return [syntax.fix_missing_locations(ast.copy_location(s, loop)) for s in out]


    def _assigned_outside(self, loop) -> set:
        """The names assigned in the kernel outside ``loop`` and outside the other
        T.Parallel loops, whose bodies' names are their iterations' own (TileLang's let)."""
        inside = {id(n) for other in syntax.walk(self.fdef)
                  if other is loop or (isinstance(other, ast.For) and isinstance(
                      other.iter, ast.Call) and resolve_static(
                      other.iter.func, self.ctx.namespace) is T.Parallel)
                  for s in other.body for n in syntax.walk(s)}
        return {n.id for n in syntax.walk(self.fdef) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store) and id(n) not in inside}


def expand_dynamic_parallel_loops(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(isinstance(n, ast.For) and isinstance(n.iter, ast.Call)
               and resolve_static(n.iter.func, ctx.namespace) is T.Parallel
               for n in syntax.walk(fdef)):
        return fdef
    return syntax.fix_missing_locations(_Dynamic(ctx, fdef).visit(fdef))

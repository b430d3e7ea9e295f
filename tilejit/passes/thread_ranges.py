"""Tile operations on shared tiles and tensors inside a branch that a range of the block's
threads takes (``if tx < 128:``, ``if 128 <= tx < 256:``): done by those threads.

TileLang maps such an operation onto the threads of the range. Here a ``T.copy``, a
``T.fill`` / ``T.clear`` of a shared tile and a ``T.Parallel`` loop whose body indexes no
fragment become the element loop they mean, each thread of the range ``lo … hi − 1``
taking every ``(hi − lo)``-th element (a trip count every thread shares):

    for __tj_r in range(ceil(E / n)):           # n = hi − lo, E the elements
        __tj_e = __tj_r * n + (tid − lo)
        if __tj_e < E:
            i, j = __tj_e // e1, __tj_e % e1
            <body>

A ``T.copy`` reads a global region's elements only inside the tensor (0 outside) and
writes only those inside, as everywhere. The branch then holds per-thread code only:
``barriers.py`` puts the barrier that orders its writes before the block's later reads
after the branch, where every thread reaches it. Inside the branch, a statement that
reads a tile (or tensor) an earlier one wrote, or writes one it read or wrote, where
either is such an operation (its elements spread over the range's threads), gets a named
barrier of the range's threads before it (``bar.sync id, hi − lo``, ids 15 down to 9);
the range must then be whole warps. Operations on fragments, gemms and
reductions under such a branch stay errors (``thread_branches.py``): a fragment's layout
spreads it over the whole block.
"""
from __future__ import annotations

import ast
import copy
import math

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.frontend.tile_operands import region_call
from tilejit.ir.markers import REGION, SYNC_RANGE, THREAD_INDEX
from tilejit.passes.static_eval import NotStatic, StaticEval

_ALLOCS = {T.alloc_shared: "shared", T.alloc_fragment: "fragment", T.alloc_local: "local",
           T.alloc_var: "local"}


class _Refused(Exception):
    """A tile operation of the branch that this rewrite does not take."""


def _name(n: str, store=False):
    return ast.Name(n, ast.Store() if store else ast.Load())


def _c(v):
    return ast.Constant(v)


class _Ranges:
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
        self.tiles = {}                 # name -> (kind, static shape or None)
        for node in syntax.walk(fdef):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
                kind = _ALLOCS.get(resolve_static(node.value.func, ctx.namespace))
                if kind is None:
                    continue
                shape = None
                if node.value.args:
                    try:
                        shape = self.static.value(node.value.args[0])
                        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
                    except (NotStatic, TypeError):
                        shape = None
                self.tiles[node.targets[0].id] = (kind, shape)
        self.count = 0
        self.barrier = None             # this branch's named barrier, once one is needed

    # -- operands --------------------------------------------------------------------
    def _operand(self, node):
        """(name, starts [exprs], ranged dims, extents or None, is_global)."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            node = region_call(node)             # X[r0:r1, c] as the front end reads it
        if isinstance(node, ast.Name):
            if node.id in self.tiles:
                kind, shape = self.tiles[node.id]
                if kind != "shared" or shape is None:
                    raise _Refused(node.id)
                return node.id, [_c(0)] * len(shape), list(range(len(shape))), shape, False
            if node.id in self.ctx.params:
                ndim = self.ctx.params[node.id].ndim
                shape = self._param_shape(node.id, ndim)
                if shape is None:
                    raise _Refused(node.id)
                return node.id, [_c(0)] * ndim, list(range(ndim)), shape, True
            raise _Refused(node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == REGION and isinstance(node.args[0], ast.Name):
            name = node.args[0].id
            is_global = name in self.ctx.params
            if not is_global and self.tiles.get(name, ("",))[0] != "shared":
                raise _Refused(name)
            kinds = node.args[1].value
            starts = list(node.args[2].elts)
            ends = list(node.args[3].elts)
            ranged = [d for d, k in enumerate(kinds) if k == "s"]
            extents = []
            for d in ranged:
                end = ends[d]
                if isinstance(end, ast.Constant) and end.value is None:
                    if is_global:
                        extents = None
                        break
                    end = _c(self.tiles[name][1][d])
                try:
                    extents.append(self.static.value(
                        ast.BinOp(end, ast.Sub(), starts[d])))
                except NotStatic:
                    extents = None
                    break
            return name, starts, ranged or None, tuple(extents) if extents else None, \
                is_global
        raise _Refused(ast.unparse(node))

    def _param_shape(self, name, ndim):
        from tilejit.frontend.rewrite import shape_constant_name  # a pass's helper, lazily
        dims = [self.ctx.namespace.get(shape_constant_name(name, d)) for d in range(ndim)]
        return tuple(dims) if all(isinstance(d, int) for d in dims) else None

    def _match(self, op, other_extents):
        """The operand with its ranged dims and extents settled from the other's."""
        name, starts, ranged, extents, is_global = op
        ndim = len(starts)
        if ranged is None:                       # X[r0, c0]: the last dims from there
            k = len(other_extents)
            return name, starts, list(range(ndim - k, ndim)), tuple(other_extents), is_global
        if extents is None:
            squeezed = [e for e in other_extents if e != 1] \
                if len(other_extents) != len(ranged) else list(other_extents)
            if len(squeezed) != len(ranged):
                raise _Refused(name)
            return name, starts, ranged, tuple(squeezed), is_global
        return op

    def _element(self, op, loop_vars):
        """(subscript expression, in-bounds test or None) of the operand's element at
        the loop's indices (dims of extent 1 at their start)."""
        name, starts, ranged, extents, is_global = op
        it = iter(loop_vars)
        idx = []
        for d, start in enumerate(starts):
            if d in ranged and extents[ranged.index(d)] != 1:
                idx.append(ast.BinOp(start, ast.Add(), _name(next(it))))
            else:
                idx.append(start)
        sub = ast.Subscript(_name(name), idx[0] if len(idx) == 1 else
                            ast.Tuple(idx, ast.Load()), ast.Load())
        test = None
        if is_global:
            checks = []
            for d, i in enumerate(idx):
                shape = ast.Subscript(ast.Attribute(_name(name), "shape", ast.Load()), _c(d),
                                      ast.Load())
                checks.append(ast.Compare(_c(0), [ast.LtE(), ast.Lt()], [i, shape]))
            test = checks[0] if len(checks) == 1 else ast.BoolOp(ast.And(), checks)
        return sub, test

    # -- operations ------------------------------------------------------------------
    def copy(self, call):
        if len(call.args) != 2 or call.keywords:
            raise _Refused("T.copy with options")
        src, dst = (self._operand(a) for a in call.args)
        if src[3] is None and dst[3] is None:
            raise _Refused("T.copy without extents")
        if src[3] is None:
            src = self._match(src, dst[3])
        if dst[3] is None:
            dst = self._match(dst, src[3])
        extents = [e for e in src[3] if e != 1]
        if extents != [e for e in dst[3] if e != 1]:
            raise _Refused("T.copy of different extents")
        names = self._names(len(extents))
        s_sub, s_in = self._element(src, names)
        d_sub, d_in = self._element(dst, names)
        d_sub.ctx = ast.Store()
        store = ast.Assign([d_sub], s_sub)
        if s_in is not None:
            zero = ast.Assign([copy.deepcopy(d_sub)], _c(0))
            store = ast.If(s_in, [store], [zero])
        body = [store] if d_in is None else [ast.If(d_in, [store], [])]
        return names, extents or [1], body

    def fill(self, call, value):
        (target,) = call.args[:1]
        op = self._operand(target)
        if op[4] or op[3] is None:
            raise _Refused("T.fill of a tensor")
        extents = [e for e in op[3] if e != 1]
        names = self._names(len(extents))
        sub, _ = self._element(op, names)
        sub.ctx = ast.Store()
        return names, extents or [1], [ast.Assign([sub], value)]

    def _names(self, k):
        self.count += 1
        return [f"__tj_tr{self.count}_{d}" for d in range(max(k, 1))]

    def per_thread(self, names, extents, body, lo, hi, like):
        """The element loop over ``extents`` done by threads lo … hi − 1."""
        n = hi - lo
        total = math.prod(extents)
        r, e = f"__tj_tr{self.count}_r", f"__tj_tr{self.count}_e"
        tid = ast.Call(_name(THREAD_INDEX), [], [])
        first = ast.Assign([_name(e, True)], ast.BinOp(
            ast.BinOp(_name(r), ast.Mult(), _c(n)), ast.Add(),
            ast.BinOp(tid, ast.Sub(), _c(lo))))
        coords = []
        stride = total
        for v, extent in zip(names, extents):
            stride //= extent
            value = ast.BinOp(_name(e), ast.FloorDiv(), _c(stride)) if stride > 1 else _name(e)
            if stride * extent < total:
                value = ast.BinOp(value, ast.Mod(), _c(extent))
            coords.append(ast.Assign([_name(v, True)], value))
        guard = ast.If(ast.Compare(_name(e), [ast.Lt()], [_c(total)]), coords + body, [])
        loop = ast.For(_name(r, True), ast.Call(_name("range"), [_c(-(-total // n))], []),
                       [first, guard], [], None)
        return syntax.fix_missing_locations(ast.copy_location(loop, like))

    def parallel(self, loop):
        names = [t.id for t in (loop.target.elts if isinstance(loop.target, ast.Tuple)
                                else [loop.target]) if isinstance(t, ast.Name)]
        if len(names) != len(loop.iter.args) or loop.iter.keywords:
            raise _Refused("T.Parallel")
        for node in syntax.walk(loop):
            if isinstance(node, ast.Name) and self.tiles.get(node.id, ("",))[0] in (
                    "fragment", "local"):
                raise _Refused(node.id)
        try:
            extents = [self.static.value(a) for a in loop.iter.args]
        except NotStatic:
            raise _Refused("T.Parallel extents") from None
        self.count += 1
        return names, extents, loop.body

    # -- the branch ------------------------------------------------------------------
    def rewrite(self, stmts, lo, hi):
        """The statements with their tile operations done by threads lo … hi − 1, and a
        named barrier of those threads before one that reads what an earlier one wrote
        (or writes what it read or wrote), where either is a tile operation: its elements
        are spread over the range's threads, so other threads' (module docstring)."""
        out = []
        ops = ([set(), set()], [set(), set()])     # (reads, writes) since the barrier:
        for stmt in stmts:                         # of tile operations, of the rest
            new = self._statement(stmt, lo, hi)
            r, w = self._touches(stmt)
            op = new is not stmt or self._holds_op(stmt)
            (orr, ow), (pr, pw) = ops
            if (r & (ow | (pw if op else set()))) or \
                    (w & (orr | ow | ((pr | pw) if op else set()))):
                out.append(self._range_barrier(lo, hi, stmt, sorted((r | w) & (orr | ow | pw))))
                ops = ([set(), set()], [set(), set()])
            mine = ops[0 if op else 1]
            mine[0] |= r
            mine[1] |= w
            out.append(new)
        return out

    def _holds_op(self, stmt) -> bool:
        return any(isinstance(n, ast.Call) and resolve_static(n.func, self.ctx.namespace) in (
            T.copy, T.fill, T.clear, T.Parallel) for n in syntax.walk(stmt))

    def _touches(self, stmt) -> tuple[set, set]:
        """(read, written) shared tiles and tensors a statement names: a T.copy's source
        and destination, a T.fill's target, an element store's tile, every other mention
        a read."""
        shared = {n for n, (kind, _) in self.tiles.items() if kind == "shared"}
        memory = shared | set(self.ctx.params)
        reads, writes = set(), set()

        def root(node):
            while isinstance(node, (ast.Subscript, ast.Call)) and not (
                    isinstance(node, ast.Call) and not node.args):
                node = node.value if isinstance(node, ast.Subscript) else node.args[0]
            return node.id if isinstance(node, ast.Name) else None
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Call):
                fn = resolve_static(node.func, self.ctx.namespace)
                if fn is T.copy and len(node.args) >= 2:
                    writes.add(root(node.args[1]))
                elif fn in (T.fill, T.clear) and node.args:
                    writes.add(root(node.args[0]))
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Subscript):
                        writes.add(root(target))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads.add(node.id)
        return reads & memory, writes & memory

    def _range_barrier(self, lo, hi, stmt, tiles):
        """``bar.sync id, hi − lo``: a named barrier (ids 15 down to 9, one per branch;
        1 + k are the warpgroup roles') of whole warps only."""
        what = ", ".join(f"'{t}'" for t in tiles)
        if lo % 32 or (hi - lo) % 32:
            raise self.ctx.error(
                f"threads {lo}…{hi - 1} exchange data through {what} inside this branch, "
                f"which needs a barrier of those threads alone, and a named barrier counts "
                f"whole warps: make the branch's range start and end at multiples of 32, "
                f"or move the operation out of the branch", stmt)
        if self.ctx.target.kind == "amdgpu":
            raise self.ctx.error(
                f"threads {lo}…{hi - 1} exchange data through {what} inside this branch, "
                f"which needs a barrier of those threads alone: not built for AMDGPU (its "
                f"barrier is the block's); move the operation out of the branch", stmt)
        if self.barrier is None:
            self.barrier = 16 - self.ctx.number("range barrier")
            if self.barrier < 9:
                raise self.ctx.error("more than 7 branches of thread ranges exchange data "
                                     "inside them: named barriers 9…15 are spent", stmt)
        return ast.copy_location(ast.Expr(ast.Call(
            _name(SYNC_RANGE), [_c(self.barrier), _c(hi - lo)], [])), stmt)

    def _statement(self, stmt, lo, hi):
        if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call) and \
                resolve_static(stmt.iter.func, self.ctx.namespace) is T.Parallel:
            return self.per_thread(*self.parallel(stmt), lo, hi, stmt)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            fn = resolve_static(stmt.value.func, self.ctx.namespace)
            if fn is T.copy:
                return self.per_thread(*self.copy(stmt.value), lo, hi, stmt)
            if fn in (T.fill, T.clear):
                value = stmt.value.args[1] if fn is T.fill and len(stmt.value.args) > 1 \
                    else _c(0)
                return self.per_thread(*self.fill(stmt.value, value), lo, hi, stmt)
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt.body = self.rewrite(stmt.body, lo, hi)
            stmt.orelse = self.rewrite(stmt.orelse, lo, hi)
        return stmt


def partition(ctx, fdef, stmts, lo: int, hi: int):
    """``stmts`` (a branch taken by threads lo … hi − 1) with their tile operations done
    by those threads, or None where one of them cannot be (a fragment's, a gemm)."""
    ranges = _Ranges(ctx, fdef)
    try:
        return ranges.rewrite(copy.deepcopy(stmts), lo, hi)
    except _Refused:
        return None

"""The kernel's own named barriers: ``T.sync_threads(barrier_id, arrive_count)`` and
``T.named_barrier_arrive(barrier_id, arrive_count)`` (part of ``barriers.py``).

A named barrier (``bar.sync id, count`` / ``bar.arrive id, count``) completes when
``count`` threads have arrived at it: those that wait there and those that only arrive.
Unlike ``T.sync_threads()``, some threads may reach it alone (under ``if tx < 256:``, in
one ``T.ws`` role): a protocol between groups of threads that the kernel writes itself,
such as a producer's ``T.named_barrier_arrive(3, 256)`` and its consumers'
``T.sync_threads(3, 256)``. Each becomes a marker (``SYNC_NAMED`` / ``ARRIVE_NAMED``,
lowered to ``barrier.sync`` / ``barrier.arrive`` without ``.aligned``: the warps may
reach it from different branches) with the block's threads as the count left out.

Checked here, before anything runs (``CompileError`` at the call's line): the id and
count (``tiles.check_named_barrier``) where they are known at compile time; that the id
is not one tilejit uses in this kernel (role k's ``1 + k`` where that role synchronizes:
the barrier pass's barriers in it, a reduction or scan through shared memory; a thread
range's, counted down from 15); that the target has named barriers (NVPTX). They are not
block barriers, so the shared-memory walk (``barriers.py``) counts on none of them, and
a kernel that names one is not warp-specialized by the compiler
(``warp_specialize.py``): it keeps the threads it launched, which its counts describe.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import (ARRIVE_NAMED, CUMSUM, REDUCE, ROLE_ATTR, SYNC_NAMED,
                                SYNC_RANGE, SYNC_ROLE)
from tilejit.ir.plan import FRAGMENT
from tilejit.language.tiles import check_named_barrier
from tilejit.passes.static_eval import NotStatic, StaticEval

_PARAMS = ("barrier_id", "arrive_count")


def uses_named_barriers(fdef: ast.FunctionDef, namespace) -> bool:
    """Whether the kernel names a barrier of its own."""
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Call):
            fn = resolve_static(node.func, namespace)
            if fn is T.named_barrier_arrive or (fn is T.sync_threads and
                                                (node.args or node.keywords)):
                return True
    return False


class NamedBarriers:
    """Makes each named-barrier statement its marker, and remembers the ids known at
    compile time to check them against the compiler's own (``check_ids``)."""

    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
        self.ids = []                   # (id, the statement)

    def _value(self, node):
        try:
            value = self.static.value(node)
        except NotStatic:
            return None
        return int(value) if isinstance(value, int) and not isinstance(value, bool) \
            else value

    def statement(self, node: ast.Expr, call: ast.Call, fn) -> ast.Expr:
        what = f"T.{fn.__name__}({ast.unparse(call)[len(ast.unparse(call.func)) + 1:]}"
        values = dict(zip(_PARAMS, call.args))
        extra = len(call.args) > 2
        for k in call.keywords:
            extra |= k.arg not in _PARAMS or k.arg in values
            values[k.arg] = k.value
        required = _PARAMS if fn is T.named_barrier_arrive else _PARAMS[:1]
        if extra or any(p not in values for p in required):
            raise self.ctx.error(f"{what}: takes {' and '.join(required)}"
                                 f"{'' if len(required) == 2 else ' (and arrive_count)'}",
                                 node)
        if not self.ctx.target.is_sim and self.ctx.target.kind != "cuda":
            raise self.ctx.error(f"{what}: named barriers are not built for "
                                 f"{self.ctx.target.kind} (its barrier is the block's); use "
                                 f"T.sync_threads()", node)
        block = self.ctx.plan.block_threads
        known = {p: self._value(v) for p, v in values.items()}
        problem = check_named_barrier(what, known.get("barrier_id"),
                                      known.get("arrive_count"), block)
        if problem:
            raise self.ctx.error(problem, node)
        if known["barrier_id"] is not None:
            self.ids.append((known["barrier_id"], node))
        count = values.get("arrive_count", ast.Constant(block))
        marker = SYNC_NAMED if fn is T.sync_threads else ARRIVE_NAMED
        return ast.copy_location(ast.Expr(ast.Call(ast.Name(marker, ast.Load()),
                                                   [values["barrier_id"], count], [])), node)

    def _role_barrier(self, node) -> bool:
        """Whether ``node``, in a ``T.ws`` role, synchronizes the role on its named barrier
        (``1 + k``): the barrier pass's, or a reduction's or scan's exchange through
        shared memory (``lowering/tiles.tile_threads_barrier``)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return False
        if node.func.id in (SYNC_ROLE, CUMSUM):
            return True
        if node.func.id != REDUCE:
            return False
        rid = node.args[-1].value
        src = self.ctx.plan.tiles[self.ctx.plan.reductions[rid][0]]
        return rid in self.ctx.plan.scratch or src.kind != FRAGMENT

    def check_ids(self, fdef: ast.FunctionDef) -> None:
        """No id the kernel names is one tilejit gives its own barriers here."""
        if not self.ids:
            return
        used = {}
        for n in syntax.walk(fdef):
            k = getattr(n, ROLE_ATTR, None) if isinstance(n, ast.If) else None
            if k is not None and any(self._role_barrier(c) for c in syntax.walk(n)):
                used[1 + k] = f"warpgroup role {k}'s (T.ws({k}))"
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                    n.func.id == SYNC_RANGE and isinstance(n.args[0], ast.Constant):
                used[n.args[0].value] = ("the one tilejit gives a branch's range of threads "
                                         "(their tile operations)")
        for barrier, node in self.ids:
            if barrier in used:
                free = [i for i in range(1, 16) if i not in used]
                raise self.ctx.error(
                    f"named barrier {barrier} is {used[barrier]} in this kernel; name "
                    f"another (free here: {', '.join(map(str, free))})", node)

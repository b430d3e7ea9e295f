"""Pass: let a wgmma gemm run on while the statements after it that do not need it run.

A ``T.gemm`` on wgmma (``codegen/lowering/wgmma.py``) ends with ``wgmma.wait_group 0``:
the warpgroup waits for the tensor cores before its next instruction. Where the
statements that follow neither touch the gemm's accumulator nor write its operands (a
copy of another fragment to shared memory, an ``mma.sync`` gemm, atomics), the wait can
come later: this pass marks such a gemm deferred (``plan.deferred_waits``: it commits
its group and returns) and inserts ``__tj_wgmma_wait(gemm id, ...)`` where the wait has
to be, which waits and hands the accumulator registers back to the program.
FlashAttention's backward is the case: dK's product runs beside the dQ product
(``mma.sync``) and its atomics (0.890 → 0.919 of FA2's backward, fp16; 0.847 → 0.867
causal; H200, 2026-12-03).

The window of a gemm ends at the first statement of its statement list that is not one
of these, or that is but touches the gemm:

- another wgmma gemm, always: running two products back to back keeps the first one's
  register operand live through the second, and in FlashAttention's backward that
  spilled (dV deferred past dP^T: 0.85 of FA2 against 0.89 waiting);
- an ``mma.sync`` gemm that writes or accumulates into any of the gemm's tiles, reads
  its accumulator, or refills a tile the gemm reads;
- ``T.copy`` reading the accumulator or writing any of the gemm's tiles;
- ``T.atomic_add``, a fragment loop or a plain assignment naming any of its tiles;
- anything else: another marker (a stage release, an mbarrier, a TMA call), an ``if``,
  a loop. A block barrier ``__tj_sync()`` may stay inside, as below.

A barrier inside a window lets another warpgroup run ahead while this one's gemm may
still read its shared operands. That is safe when nothing in the window after the
barrier writes them (the rules above) and the write that the barrier protected comes
after another barrier that follows the wait: so a window holds a barrier only when it
runs to the end of a ``for`` body whose first statements, before any that names the
gemm's shared operands, include a barrier, and the statements after that loop do the
same (or never name them). Otherwise the window ends at its first barrier.

Only targets with wgmma have deferred gemms; the simulator is not affected (its own
transform runs the kernel's source).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.ir.markers import FRAG_LOOP, GEMM, SYNC, WGMMA_WAIT
from tilejit.ir.plan import SHARED

_ALLOWED_T = {"copy", "atomic_add"}


def defer_wgmma_waits(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    wgmma = {gid for gid, (gp, *_rest) in plan.gemms.items() if gp.engine == "wgmma"}
    if not wgmma or ctx.target.is_sim:
        return fdef
    # a gemm whose call a pass copied (one id at two sites) keeps its wait: the id marks
    # every site deferred, and only one would get the wait
    sites: dict[str, int] = {}
    for node in syntax.walk(fdef):
        gid = _gemm_id(node) if isinstance(node, ast.Call) else None
        if gid is not None:
            sites[gid] = sites.get(gid, 0) + 1
    wgmma = {gid for gid in wgmma if sites.get(gid) == 1}
    _Lists(ctx, wgmma).visit_lists(fdef, fdef.body, parents=[])
    return fdef


def _names(node) -> set[str]:
    return {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)}


def _call(stmt):
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def _marker(call, name) -> bool:
    return call is not None and isinstance(call.func, ast.Name) and call.func.id == name


def _t_function(call, ctx):
    """The name of the tilejit.language function a call ``T.f(...)`` makes, or None."""
    func = call.func if call is not None else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = ctx.namespace.get(func.value.id)
        if getattr(module, "__name__", "").startswith("tilejit.language"):
            return func.attr
    return None


def _gemm_id(call) -> str | None:
    if _marker(call, GEMM) and len(call.args) >= 4 and isinstance(call.args[3], ast.Constant):
        return call.args[3].value
    return None


def _tile_of(node) -> str | None:
    """The tile an operand names: ``X`` or ``__tj_stage(X, k)``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
        return node.args[0].id
    return None


class _Pending:
    """A gemm's tiles, each with its views (``T.reshape``/``T.view``) and their base:
    a statement naming any of them touches the tile."""

    def __init__(self, gid, call, plan):
        self.gid = gid
        def named(t):
            return plan.aliases(t) if t in plan.tiles else {t}
        self.acc = named(_tile_of(call.args[2]))
        reads = {t for t in (_tile_of(call.args[0]), _tile_of(call.args[1])) if t}
        self.reads = set().union(*map(named, reads))
        self.shared = {t for t in self.reads if plan.tiles[t].kind == SHARED}
        self.tiles = self.reads | self.acc


class _Lists:
    def __init__(self, ctx, wgmma):
        self.ctx, self.wgmma = ctx, wgmma

    def visit_lists(self, owner, body, parents):
        """Every statement list, innermost first, then this one."""
        for stmt in body:
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self.visit_lists(stmt, inner, parents + [(owner, body)])
        self._defer_in(owner, body, parents)

    def _defer_in(self, owner, body, parents):
        plan = self.ctx.plan
        waits: dict[int, list[str]] = {}        # index in body -> gemm ids waited there
        for index, stmt in enumerate(body):
            call = _call(stmt)
            gid = _gemm_id(call)
            if gid not in self.wgmma or gid in plan.deferred_waits:
                continue
            pending = _Pending(gid, call, plan)
            end, barrier = index + 1, None
            while end < len(body) and self._allowed(body[end], pending):
                if _marker(_call(body[end]), SYNC) and barrier is None:
                    barrier = end
                end += 1
            if barrier is not None and not (end == len(body) and self._loop_safe(
                    owner, pending, parents)):
                end = barrier
            if end == index + 1:
                continue                        # the next statement needs it: no gain
            plan.deferred_waits.add(gid)
            waits.setdefault(end, []).append(gid)
        for at in sorted(waits, reverse=True):
            call = ast.Call(ast.Name(WGMMA_WAIT, ast.Load()),
                            [ast.Constant(g) for g in waits[at]], [])
            stmt = ast.Expr(call)
            ast.copy_location(stmt, body[min(at, len(body) - 1)])
            body.insert(at, syntax.fix_missing_locations(stmt))

    def _allowed(self, stmt, p: _Pending) -> bool:
        """Whether ``stmt`` may run while gemm ``p`` is in flight."""
        call = _call(stmt)
        if _marker(call, SYNC):
            return True
        if _gemm_id(call) in self.wgmma:
            return False        # (see the docstring: overlapping two wgmma gemms lost)
        if _gemm_id(call) is not None:
            other = _Pending(_gemm_id(call), call, self.ctx.plan)
            if other.acc & p.tiles or p.acc & other.reads:
                return False
            refills = set().union(*map(_names, call.args[4:])) if len(call.args) > 4 else set()
            return not refills & p.tiles
        name = _t_function(call, self.ctx)
        if name == "copy" and len(call.args) == 2:
            return not (_names(call.args[0]) & p.acc or _names(call.args[1]) & p.tiles)
        if name in _ALLOWED_T:
            return not _names(call) & p.tiles
        if isinstance(stmt, ast.For) and _marker(stmt.iter if isinstance(stmt.iter, ast.Call)
                                                  else None, FRAG_LOOP):
            return not _names(stmt) & p.tiles
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            calls = [n for n in syntax.walk(stmt.value) if isinstance(n, ast.Call)]
            return not calls and not _names(stmt) & p.tiles
        return False

    def _loop_safe(self, owner, p: _Pending, parents) -> bool:
        """A window that holds a barrier and reaches the end of ``owner``'s body: safe
        when ``owner`` is a ``for`` loop whose body, and the statements after the loop,
        reach a barrier before naming the gemm's shared operands (see the docstring)."""
        if not isinstance(owner, ast.For) or not parents:
            return False
        if not self._barrier_first(owner.body, p.shared):
            return False
        parent, siblings = parents[-1]
        after = siblings[siblings.index(owner) + 1:]
        if self._barrier_first(after, p.shared):
            return True
        # the loop is the last user in a list that ends the kernel's body: nothing follows
        return not any(_names(s) & p.shared for s in after) and len(parents) == 1

    @staticmethod
    def _barrier_first(stmts, shared) -> bool:
        """Whether ``stmts`` reach a top-level ``__tj_sync()`` before any statement that
        names one of ``shared``."""
        for stmt in stmts:
            if _marker(_call(stmt), SYNC):
                return True
            if _names(stmt) & shared:
                return False
        return False

"""Pass: a kernel's own Hopper synchronization (seed 000's ``T.ws`` GEMM) for the GPU.

TileLang lets a kernel split its block itself: ``with T.ws(k):`` runs its body in
warpgroup k only (threads ``128 k … 128 k + 127``), and the warpgroups order their work
through mbarriers the kernel allocates, waits on and arrives at, with ``T.tma_copy``
adding a TMA load's bytes to a barrier's phase. The simulator gives these forms their
meaning (``sim/roles.py``); this pass puts them into the compiler's forms:

- ``mbars = T.alloc_barrier([c0, c1, …])`` (at the kernel's top level) → mbarrier slots
  in the plan, ``mbars = <first slot>``, thread 0's ``mbarrier.init`` of each with its
  count, and a block barrier; ``mbars[i]`` is slot ``first + i``.
- ``T.mbarrier_wait_parity(b, parity)`` → every thread's ``try_wait.parity`` loop;
  ``T.mbarrier_arrive(b)`` → every thread's arrival (the counts count threads: 128 for a
  warpgroup), made once per warp by lane 0 with a count of 32 where every lane of the
  warp reaches it (not under an ``if``, ``while`` or ``T.Parallel``).
- A role whose statements are only waits, ``T.tma_copy`` and arrivals (a producer) runs
  them in its first thread alone, which arrives for the 128: the other threads would
  only spin on the same waits, taking issue slots from the warpgroups that compute.
- ``T.tma_copy(src, dst, barrier=b)`` → ``__tj_tma_copy``, which ``tma.py`` plans once
  the layouts are known (a tensor map per box, ``mbarrier.expect_tx`` of the bytes by
  the role's first thread, no arrival).
- ``with T.ws(k): body`` → ``if __tj_ws_role() == k: body``, marked with ``ROLE_ATTR``:
  the barrier pass gives the body named barrier ``1 + k`` and orders nothing across
  roles (the kernel's mbarriers do).
- ``T.Pipelined(n, …)`` → ``range(n)``: the kernel runs its own pipeline.

The tiles of such a kernel are planned over one warpgroup (``compiler/pipeline.py``
passes 128 threads to the passes, ``plan.role_threads``; ``context.thread_index`` is
then the index within the warpgroup) and the block is launched with the kernel's
``threads``. Every role therefore holds its own copy of each fragment, as in the
simulator. The forms need sm_90's TMA and ``mbarrier.try_wait``.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.explicit_sync import explicit_forms, is_ws
from tilejit.frontend.source import resolve_static
from tilejit.language.hopper import MAX_ARRIVALS, WARPGROUP_THREADS as ROLE_THREADS
from tilejit.ir.markers import (MBAR_ARRIVE_ALL, ROLE_ATTR, ROLE_LEADER, SYNC, TMA_COPY,
                                TMA_INIT, TMA_WAIT, WS_ROLE)
from tilejit.passes.static_eval import NotStatic, StaticEval



def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _expr(call, like):
    return ast.copy_location(ast.Expr(call), like)


def _args(node, names):
    """A call's operands by name (positional or keyword), None for a missing one."""
    values = dict(zip(names, node.args))
    values.update({k.arg: k.value for k in node.keywords})
    return [values.get(n) for n in names]


class _Roles(syntax.NodeTransformer):
    def __init__(self, ctx, static, roles):
        self.ctx, self.static, self.roles = ctx, static, roles
        self.barriers = set()           # names bound to T.alloc_barrier
        self.role = None
        self.depth = 0                  # loops and branches around the statement
        self.divergent = 0              # ifs, whiles and T.Parallel loops around it

    def _error(self, message, node):
        return self.ctx.error(message, node)

    def _fn(self, node):
        return resolve_static(node.func, self.ctx.namespace) if isinstance(node, ast.Call) \
            else None

    # -- statements ---------------------------------------------------------------------
    def visit_Assign(self, node):
        if self._fn(node.value) is T.alloc_barrier:
            return self._alloc_barrier(node)
        return self.generic_visit(node)

    def _alloc_barrier(self, node):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            raise self._error("assign T.alloc_barrier(...) to one name", node)
        if self.depth or self.role is not None:
            raise self._error("T.alloc_barrier must be at the kernel's top level (its "
                              "barriers are initialized once, by the whole block)", node)
        (arg,) = _args(node.value, ["arrive_count"])
        try:
            counts = self.static.value(arg) if arg is not None else None
        except NotStatic:
            counts = None
        counts = [counts] if isinstance(counts, int) else counts
        if not (isinstance(counts, (list, tuple)) and counts and all(
                isinstance(c, int) and 0 < c <= MAX_ARRIVALS for c in counts)):
            raise self._error(f"T.alloc_barrier(counts): the arrival counts must be integers "
                              f"in 1 … {MAX_ARRIVALS} known at compile time, got "
                              f"`{ast.unparse(arg) if arg is not None else ''}`", node)
        name = node.targets[0].id
        self.barriers.add(name)
        plan = self.ctx.plan
        first = plan.mbarriers
        plan.mbarriers += len(counts)
        out = [ast.copy_location(ast.Assign([ast.Name(name, ast.Store())],
                                            ast.Constant(first)), node)]
        run = 0
        for i in range(1, len(counts) + 1):     # one init per run of equal counts
            if i == len(counts) or counts[i] != counts[run]:
                out.append(_expr(_call(TMA_INIT, [ast.Constant(first + run),
                                                  ast.Constant(i - run),
                                                  ast.Constant(counts[run])]), node))
                run = i
        out.append(_expr(_call(SYNC, []), node))
        return out

    def visit_For(self, node):
        if self._fn(node.iter) is T.Pipelined:  # the kernel pipelines by itself
            node.iter = ast.copy_location(_call("range", node.iter.args[:1]), node.iter)
        return self._nested(node, self._fn(node.iter) is T.Parallel)

    def visit_While(self, node):
        return self._nested(node, True)

    def visit_If(self, node):
        return self._nested(node, True)

    def _nested(self, node, divergent):
        self.depth += 1
        self.divergent += divergent
        node = self.generic_visit(node)
        self.depth -= 1
        self.divergent -= divergent
        return node

    def visit_With(self, node):
        if not is_ws(node, self.ctx.namespace):
            return self.generic_visit(node)
        call = node.items[0].context_expr
        if self.role is not None:
            raise self._error("T.ws roles do not nest", node)
        if len(call.args) != 1 or any(k.arg != "role_threads" for k in call.keywords) or \
                node.items[0].optional_vars is not None:
            raise self._error("with T.ws(k): takes one warpgroup index (a role of several "
                              "warpgroups, T.ws(j, k), is not built: write a role per "
                              "warpgroup, each with its share of the work)", node)
        try:
            role = self.static.value(call.args[0])
        except NotStatic:
            role = None
        if not (isinstance(role, int) and 0 <= role < self.roles):
            raise self._error(f"T.ws(k): k must be a warpgroup of the block, an integer in "
                              f"0 … {self.roles - 1} known at compile time (the block has "
                              f"{self.roles * self.ctx.plan.role_threads} threads), got "
                              f"`{ast.unparse(call.args[0])}`", node)
        self.role, outer = role, self.divergent
        self.divergent = 0
        body = [self.visit(s) for s in node.body]
        self.role, self.divergent = None, outer
        body = [s for b in body for s in (b if isinstance(b, list) else [b])]
        if all(_is_call(s, TMA_WAIT, TMA_COPY, MBAR_ARRIVE_ALL) for s in body):
            body = [ast.copy_location(ast.If(_call(ROLE_LEADER, []),
                                             _elected(body, self.ctx.plan.role_threads), []),
                                      node)]
        test = ast.Compare(_call(WS_ROLE, []), [ast.Eq()], [ast.Constant(role)])
        new = ast.copy_location(ast.If(test, body, []), node)
        setattr(new, ROLE_ATTR, role)
        return new

    # -- expressions --------------------------------------------------------------------
    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.barriers:
            return ast.copy_location(ast.BinOp(node.value, ast.Add(), node.slice), node)
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        fn = self._fn(node)
        if fn is T.mbarrier_wait_parity:
            bar, parity = _args(node, ["mbarrier", "parity"])
            if bar is None or parity is None:
                raise self._error("T.mbarrier_wait_parity(mbarrier, parity)", node)
            return ast.copy_location(_call(TMA_WAIT, [bar, parity, ast.Constant(False)]), node)
        if fn is T.mbarrier_arrive:
            bar, cta = _args(node, ["mbarrier", "cta_id"])
            if bar is None:
                raise self._error("T.mbarrier_arrive(mbarrier)", node)
            if cta is not None and not (isinstance(cta, ast.Constant) and cta.value is None):
                raise self._error("T.mbarrier_arrive(..., cta_id=...): arrivals on another "
                                  "block of a cluster are not built (no clusters yet)", node)
            per_warp = not self.divergent
            return ast.copy_location(
                _call(MBAR_ARRIVE_ALL, [bar, ast.Constant(32 if per_warp else 1)]), node)
        if fn is T.tma_copy:
            src, dst, bar = _args(node, ["src", "dst", "barrier"])
            if src is None or dst is None or bar is None:
                raise self._error("T.tma_copy(src, dst, barrier=b): a global region, a "
                                  "shared tile, and the mbarrier its bytes complete on", node)
            return ast.copy_location(_call(TMA_COPY, [src, dst, bar]), node)
        return node


def _is_call(stmt, *names) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in names)


def _elected(body, role_threads):
    """A producer role's statements for its first thread alone: its arrivals count for
    the whole role."""
    for stmt in body:
        if _is_call(stmt, MBAR_ARRIVE_ALL):
            stmt.value.args[1] = ast.Constant(role_threads)
    return body


def lower_warp_roles(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    found = explicit_forms(fdef, ctx.namespace)
    if not found:
        return fdef
    target = ctx.target
    hopper = [(name, node) for name, node in found if name != "T.ws"]
    if hopper and not target.is_sim and not (target.is_cuda and target.has_tma):
        name, node = hopper[0]    # roles alone need named barriers only (sm_70+)
        raise ctx.error(f"{name} needs Hopper's TMA and mbarrier waits (sm_90 or newer); "
                        f"the target is {target}", node)
    launched = ctx.plan.launch_threads or ctx.threads
    fdef = _Roles(ctx, StaticEval(ctx.namespace, ctx.param_dtypes, fdef),
                  launched // (ctx.plan.role_threads or ROLE_THREADS)).visit(fdef)
    return syntax.fix_missing_locations(fdef)

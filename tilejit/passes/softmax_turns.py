"""Pass: the consumer warpgroups of a warp-specialized attention kernel take turns at
their exponentials.

FlashAttention's consumer loop runs, in each warpgroup, QK^T on the tensor cores, the
online softmax, and P·V. The softmax's exp2s run on the special function units (16
results a clock per SM): a 64×128 score tile is 8 K of them, as long as one of the
warpgroup's two products on the tensor cores. When two warpgroups reach their
exponentials together, each takes twice as long, and the tensor cores idle because
neither has a product to issue. cuDNN's Hopper kernel (its SASS on the H200,
2026-12-04) orders them: warpgroup g waits for its turn (named barrier ``2 + g``) just
before its exponentials and hands the turn to the other warpgroup right after them, so
one warpgroup's exp2s always run beside the other's products.

    turn START          (before the loop: warpgroup 1 gives warpgroup 0 its first turn)
    for k in range(n):
        ... QK^T, mask, row max, correction factor ...
        turn WAIT           bar.sync 2 + g, 256
        for s in frag_loop: S[s] = exp2(S[s] * scale - m * scale)
        reduce_sum(S, l)    its per-thread partials, then
                            bar.arrive 2 + (1 - g), 256   (after every exp2: see below),
                            then the partials' shuffles
        ... P = cast(S), O *= factor, P·V ...
    turn FINISH         (after the loop: warpgroup 0 takes the last handover)
    sync_consumers      (both warpgroups: a next run of the loop starts afresh)

ptxas schedules arithmetic across a named barrier freely: left alone it sinks the
exp2s below the ``bar.arrive`` (nearer their uses), and the turn orders nothing (the
first version measured no gain for that reason: 2026-12-04). The handover's barrier id
is therefore computed inside its PTX from the bits of this thread's partial row sums
(``(bits & 1)`` folded in with ``max``: always the same id, but a value ptxas must wait
for), which need every exp2 of the thread; the reduction's lowering emits it between
the partials and their shuffles (``plan.turn_handovers``), so the shuffles' latency is
not part of the turn, as in cuDNN's kernel, whose arrival comes among its last exp2s.
The wait is a plain ``bar.sync``: ptxas does not hoist the exp2s above it (it does once
the wait's id depends on the row max, tried: the max and its shuffles then precede the
wait, but so do the exp2s). Correctness never depends on any of that: only where
ptxas may put the instructions.

Measured on the H200 (b4 h32 s4096 d128, same process, 2026-12-04), with ÷ without:
two consumer warpgroups (128×128 blocks, 256 threads) 1.08 / 1.08 (fp16 / bf16,
non-causal) and 1.07 / 1.07 (causal), 0.92 → 1.00 of cuDNN in fp16; three (192×96,
384 threads, the turns going round) 1.01 / 1.03 non-causal but 0.93 / 0.97 causal, and
192×80 0.98–0.99: with three, two warpgroups' products already cover the third's
exponentials, and a turn only makes warpgroups wait. So it applies to a kernel the
compiler warp-specialized (``warp_specialize.py``) with two consumer warpgroups, to
the one loop of their branch that runs two wgmma gemms with, between them, a fragment
loop that writes exp/exp2 of the first gemm's accumulator followed right away by a sum
reduction of it into a 32-bit fragment that needs no exchange between warps (the
lowering takes any number of warpgroups round). Nothing between a warpgroup's wait and
its handover may wait for the other warpgroup: a reduction through shared memory (64-row
blocks on 256 threads, whose rows span both) would deadlock, and so would exponentials
reading a shared tile (a barrier of both may come before them); neither is matched.
Results do not
change (the same instructions, in another order). ``CompileOptions.softmax_turns``
(``TILEJIT_TURNS=0``) turns it off. The simulator runs the kernel's source, without it.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import statement_lists
from tilejit.ir.markers import (FRAG_LOOP, FRAG_SET, GEMM, REDUCE, SYNC_CONSUMERS, TURN,
                                TURN_FINISH, TURN_START, TURN_WAIT, WS_ATTR)
from tilejit.language.hopper import WARPGROUP_THREADS

# the element-wise exponentials of the language (T.exp2, T.exp and their fast forms)
_EXPONENTIALS = frozenset(("exp2", "exp", "__exp2", "__exp", "fast_exp2", "fast_exp"))


def _call_of(stmt, name):
    """The call of marker ``name`` that ``stmt`` is (an expression statement), or None."""
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == name):
        return stmt.value
    return None


def _name_of(node):
    return node.id if isinstance(node, ast.Name) else None


def _writes_exponential_of(loop, acc) -> bool:
    """A fragment loop (``for s in __tj_frag_loop(..)``) whose body stores exp/exp2 of
    something into fragment ``acc``."""
    if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
            and _name_of(loop.iter.func) == FRAG_LOOP):
        return False
    for stmt in loop.body:
        call = _call_of(stmt, FRAG_SET)
        if call is not None and _name_of(call.args[0]) == acc and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in _EXPONENTIALS for n in syntax.walk(call.args[2])):
            return True
    return False


def _turn(step):
    return ast.Expr(ast.Call(ast.Name(TURN, ast.Load()), [ast.Constant(step)], []))


def _place(loop, plan):
    """(index before which to wait, the row sum's reduction id) in ``loop``'s body, or
    None where the loop is not an attention step."""
    body = loop.body
    if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in syntax.walk(loop)):
        return None     # a warpgroup could leave early: the other would wait for its turn
    gemms = [i for i, st in enumerate(body) if (c := _call_of(st, GEMM)) is not None
             and isinstance(c.args[3], ast.Constant)
             and plan.gemms[c.args[3].value][0].engine == "wgmma"]
    if len(gemms) != 2:
        return None
    first, second = gemms
    acc = _name_of(_call_of(body[first], GEMM).args[2])
    exps = [i for i in range(first + 1, second) if _writes_exponential_of(body[i], acc)]
    if len(exps) != 1 or exps[0] + 1 >= second:
        return None
    # the exponentials read registers only: a shared tile there could need a barrier of
    # both warpgroups (barriers.py puts one before the loop: inside the turn, a deadlock)
    if any(isinstance(n, ast.Name) and getattr(plan.tiles.get(n.id), "kind", None) == "shared"
           for n in syntax.walk(body[exps[0]])):
        return None
    # the row sum right after the exponentials, within each warp: nothing in the turn
    # may wait for the other warpgroup (a reduction whose rows span both exchanges its
    # partials through shared memory behind a barrier of all consumers: a deadlock,
    # 64-row blocks on 256 threads)
    reduce = _call_of(body[exps[0] + 1], REDUCE)
    if reduce is None or _name_of(reduce.args[0]) != acc:
        return None
    kind, rid = (a.value if isinstance(a, ast.Constant) else None
                 for a in (reduce.args[2], reduce.args[5]))
    tile = plan.tiles.get(_name_of(reduce.args[1]))
    if (kind == "sum" and rid is not None and rid not in plan.scratch and tile is not None
            and tile.dtype.bits == 32):
        return exps[0], rid
    return None


def take_turns(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    if not (ctx.target.has_wgmma and ctx.options.softmax_turns
            and plan.ws_consumers == 2 * WARPGROUP_THREADS):
        return fdef
    split = next((n for n in syntax.walk(fdef)
                  if isinstance(n, ast.If) and getattr(n, WS_ATTR, False)), None)
    if split is None:
        return fdef
    for stmts in statement_lists(ast.Module(split.orelse, [])):   # the consumers' branch
        for at, loop in enumerate(stmts):
            if not isinstance(loop, ast.For):
                continue
            found = _place(loop, plan)
            if found is None:
                continue
            wait, rid = found
            loop.body[wait:wait] = [_turn(TURN_WAIT)]
            plan.turn_handovers.add(rid)
            # a barrier of both warpgroups after the last turn: where the loop runs again
            # (inside another loop), warpgroup 1's next START must not meet warpgroup 0's
            # FINISH still waiting for its last handover on the same barrier
            stmts[at:at + 1] = [_turn(TURN_START), loop, _turn(TURN_FINISH),
                                ast.Expr(ast.Call(ast.Name(SYNC_CONSUMERS, ast.Load()), [], []))]
            return syntax.fix_missing_locations(fdef)
    return fdef

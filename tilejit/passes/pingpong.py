"""Pass: two consumer warpgroups take turns at the tensor cores (FlashAttention-3's
ping-pong), sm_90a.

After warp specialization a FlashAttention block has two consumer warpgroups, each with
its own rows, running the same loop: QK^T, a softmax, P·V. Both wait for the same K/V
stage, so they run in step, and their softmaxes (exp2 on the SFU, ~0.5 µs a step each)
leave the tensor cores idle at the same time. Here each warpgroup's turn runs from its
second gemm (P·V of step j) to its first gemm of the next step (QK^T of j + 1), which
hands the turn over as soon as it is issued (``TilePlan.handover_gemms``: between the
gemm's ``commit_group`` and its ``wait_group``). The tensor cores then run QK0 QK1 PV0
QK0' PV1 QK1' …, and each warpgroup's softmax overlaps the other's two gemms:

    START (warpgroup 1 gives warpgroup 0 the first turn); WAIT
    for k in ...:                      # the consumers' loop (warp_specialize.py)
        wait(full); gemm QK  → HANDOVER after it is issued; softmax
        WAIT; gemm PV; arrive(empty)
    HANDOVER; END (warpgroup 0 takes the last turn warpgroup 1 gave)

Turns are named barriers 2 and 3 (``bar.sync`` of one's own, ``bar.arrive`` on the
other's, 256 threads each). Every arrival is matched, however many times the loop runs
(zero included). It runs after the barrier pass, so that no barrier of the consumers
(named barrier 1) is placed inside a turn, and applies only to a loop with none inside:
a warpgroup holding its turn at such a barrier would wait for the other, which waits for
the turn. Conditions: the consumers are two warpgroups, the loop's body has two gemm
statements on wgmma (a GEMM's body has one: nothing to overlap), and
``CompileOptions.pingpong`` (``TILEJIT_PINGPONG=0`` turns it off).
"""
from __future__ import annotations

import ast

from tilejit.ir.markers import (GEMM, PINGPONG, PINGPONG_END, PINGPONG_HANDOVER,
                                PINGPONG_START, PINGPONG_WAIT, SYNC_CONSUMERS, WS_ATTR)
from tilejit.passes.pipeline import role_of

CONSUMERS = 256     # two warpgroups


def _step(step):
    return ast.Expr(ast.Call(ast.Name(PINGPONG, ast.Load()), [ast.Constant(step)], []))


def _is_call(node, name):
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == name)


def _steady_loops(stmts):
    """(statement list, index) of each pipeline's steady loop among ``stmts``, through
    the bodies of ``for``, ``while`` and ``if``."""
    for i, st in enumerate(stmts):
        if isinstance(st, ast.For) and role_of(st) and role_of(st)[1] == "steady":
            yield stmts, i
        for field in ("body", "orelse"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _steady_loops(inner)


def take_turns(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    if not (ctx.options.pingpong and plan.ws_consumers == CONSUMERS):
        return fdef
    split = next((st for st in fdef.body if getattr(st, WS_ATTR, False)), None)
    if split is None:
        return fdef
    for stmts, i in list(_steady_loops(split.orelse)):
        loop = stmts[i]
        gemms = [j for j, st in enumerate(loop.body) if _is_call(st, GEMM)
                 and plan.gemms[st.value.args[3].value][0].engine == "wgmma"]
        if len(gemms) < 2 or any(_is_call(n, SYNC_CONSUMERS) for n in ast.walk(loop)):
            continue
        loop.body.insert(gemms[1], _step(PINGPONG_WAIT))
        plan.handover_gemms.add(loop.body[gemms[0]].value.args[3].value)
        stmts[i:i + 1] = [_step(PINGPONG_START), _step(PINGPONG_WAIT), loop,
                          _step(PINGPONG_HANDOVER), _step(PINGPONG_END)]
        break       # one pipeline per warp-specialized kernel
    return ast.fix_missing_locations(fdef)

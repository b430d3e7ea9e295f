"""Pass: a TMA pipeline feeding wgmma becomes a producer warpgroup and consumer warpgroups.

After ``tma.py`` a pipelined loop is one program that every thread runs: wait for the
stage, a block barrier (everyone is done with the stage about to be refilled), thread 0
refills it, everyone computes. On sm_90a, when the loop's consumers run a gemm on wgmma,
this pass splits the block instead (FlashAttention-3, CUTLASS's "warp-specialized"
kernels): one more warpgroup is launched after the kernel's ``threads``, whose first
thread only issues copies, and the kernel's own threads only compute; full and empty
mbarriers replace the block barrier:

    ph = 0; init(S full mbarriers, P arrivals); init(S empty, consumer warps); sync()
    <the statements before the loop that only assign names>
    if producer():                            # threads >= T (the added warpgroup)
        setmaxnreg.dec(R_producer)
        if leader():                          # thread T
            fence.proxy.async; eph = 0; ps = 0
            for k in range(n):
                if k >= S:  wait(empty[ps], (eph >> ps) & 1); eph ^= 1 << ps
                tma_load(<producers at k> → stage ps, full[ps]); ps = (ps + 1) % S
    else:                                     # threads < T
        setmaxnreg.inc(R_consumer)
        <the other statements before the loop>
        for k in range(n):
            wait(full[cs], (ph >> cs) & 1); ph ^= 1 << cs
            <consumers>                       # the gemm returns with its reads complete
            arrive(empty[cs])                 # lane 0 of each warp
            cs = (cs + 1) % S
        <the statements after the loop>

The empty barrier of a stage completes once every consumer warp has passed the gemm's
``wgmma.wait_group`` of that stage: the refill never overwrites bytes still being read
(the release the previous, unkept experiment lacked: ``tma.py``). The barrier pass then
treats the producer's branch as synchronized by the mbarriers and gives the consumers'
branch named barriers of their own (``SYNC_CONSUMERS``); the kernel is launched with
``T + 128`` threads and its entry caps registers (``nvvm.minctasm`` 1) so that
``setmaxnreg`` takes effect.

It applies to one pipelined loop at the top level of the kernel's body whose copies all
became TMA's and whose consumers contain a gemm planned on wgmma, in a block of whole
warpgroups with room for one more; ``TILEJIT_WS=0`` (``CompileOptions.warp_specialize``)
turns it off. Anything else keeps ``tma.py``'s schedule.
"""
from __future__ import annotations

import ast
import copy

from tilejit.ir.markers import (GEMM, MBAR_ARRIVE, SETMAXNREG, SYNC, TMA_FENCE, TMA_INIT,
                                TMA_LOAD, TMA_WAIT, WS_LEADER, WS_PRODUCER)
from tilejit.passes.barriers import WS_ATTR
from tilejit.passes.pipeline import role_of

WARPGROUP = 128
PRODUCER_REGISTERS = 40


def _call(name, args=()):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _expr(name, args=()):
    return ast.Expr(_call(name, args))


def _name(n):
    return ast.Name(n, ast.Load())


def _assign(n, value):
    return ast.Assign([ast.Name(n, ast.Store())], value)


def _is_call(stmt, name):
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == name)


def _only_loads(stmt):
    """An ``if`` whose body only issues TMA loads: the steady loop's refill."""
    return isinstance(stmt, ast.If) and stmt.body and all(_is_call(s, TMA_LOAD) for s in stmt.body)


class _Rename(ast.NodeTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Name(self, node):
        return copy.deepcopy(self.new) if node.id == self.old else node


def _wgmma_gemm_in(stmts, plan):
    for stmt in stmts:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == GEMM and isinstance(node.args[3], ast.Constant)
                    and plan.gemms[node.args[3].value][0].engine == "wgmma"):
                return True
    return False


def _consumer_registers(threads: int) -> int:
    """The consumers' budget: the register file (64 K) less the producer's, shared by the
    consumer threads, a multiple of 8 and at most 240."""
    per = (65536 - WARPGROUP * PRODUCER_REGISTERS) // threads
    return min(240, per - per % 8)


def specialize_warps(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    threads = ctx.threads
    if not (ctx.target.has_wgmma and ctx.options.warp_specialize and plan.tma_copies):
        return fdef
    if threads % WARPGROUP or threads + WARPGROUP > 1024 or len(ctx.pipelines) != 1:
        return fdef
    pipe = ctx.pipelines[0]
    body = fdef.body
    steady = [i for i, s in enumerate(body) if role_of(s) == (pipe.pid, "steady")]
    prologue = [i for i, s in enumerate(body) if role_of(s) == (pipe.pid, "prologue")]
    init = [i for i, s in enumerate(body) if _is_call(s, TMA_INIT)]
    if len(steady) != 1 or len(prologue) != 1 or len(init) != 1:
        return fdef                 # the loop is nested, or its copies stayed cp.async
    i_steady, i_pro = steady[0], prologue[0]
    loop = body[i_steady]
    loads = [s for s in ast.walk(body[i_pro]) if _is_call(s, TMA_LOAD)]
    if not loads or not _wgmma_gemm_in(loop.body, plan):
        return fdef
    if pipe.refill_stage is None:
        return fdef                 # a consumer may `continue`: it would skip its release
    # statements before the loop: name assignments stay shared, the rest is the consumers'
    shared, consumer_pre = [], []
    for i, stmt in enumerate(body[:i_steady]):
        if i in (i_pro, init[0]) or _is_call(stmt, TMA_FENCE) or _is_call(stmt, SYNC):
            continue
        if i < init[0]:
            continue
        (shared if isinstance(stmt, ast.Assign) else consumer_pre).append(stmt)
    stored = {n.id for s in consumer_pre for n in ast.walk(s)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for s in shared for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if stored & read:
        return fdef                 # a name the shared statements read is computed by consumers
    stages = pipe.stages
    empty0 = plan.mbarriers
    plan.mbarriers += stages
    warps = threads // 32
    plan.ws_consumers = threads
    plan.tma_issuer = threads
    plan.launch_threads = threads + WARPGROUP
    seq = ctx.number("ws")
    ps, eph, kk = f"__tj_ps{seq}", f"__tj_eph{seq}", f"__tj_pk{seq}"

    # the producer: the prologue's loads with its index as k (regions) and ps (stages)
    p_var = body[i_pro].target.id
    issue = []
    for load in loads:
        call = copy.deepcopy(load.value)
        call.args[0] = _Rename(p_var, _name(kk)).visit(call.args[0])
        call.args[1] = _Rename(p_var, _name(ps)).visit(call.args[1])
        call.args[2] = _Rename(p_var, _name(ps)).visit(call.args[2])
        issue.append(ast.Expr(call))
    stage_free = ast.If(
        ast.Compare(_name(kk), [ast.GtE()], [ast.Constant(stages)]),
        [_expr(TMA_WAIT, [ast.BinOp(ast.Constant(empty0), ast.Add(), _name(ps)),
                          ast.BinOp(ast.BinOp(_name(eph), ast.RShift(), _name(ps)),
                                    ast.BitAnd(), ast.Constant(1)),
                          ast.Constant(False)]),
         _assign(eph, ast.BinOp(_name(eph), ast.BitXor(),
                                ast.BinOp(ast.Constant(1), ast.LShift(), _name(ps))))], [])
    advance = _assign(ps, ast.IfExp(ast.Compare(_name(ps), [ast.Lt()], [ast.Constant(stages - 1)]),
                                    ast.BinOp(_name(ps), ast.Add(), ast.Constant(1)),
                                    ast.Constant(0)))
    producer_loop = ast.For(ast.Name(kk, ast.Store()), _call("range", [_name(pipe.trip_count)]),
                            [stage_free, *issue, advance], [], None)
    producer = [_expr(SETMAXNREG, [ast.Constant(False), ast.Constant(PRODUCER_REGISTERS)]),
                ast.If(_call(WS_LEADER), [_expr(TMA_FENCE), _assign(eph, ast.Constant(0)),
                                          _assign(ps, ast.Constant(0)), producer_loop], [])]

    # the consumers: the steady loop without its barrier and refill, releasing the stage
    current = copy.deepcopy(pipe.current)
    kept = [s for s in loop.body if not (_is_call(s, SYNC) or _only_loads(s))]
    at = next((i for i, s in enumerate(kept) if role_of(s) == (pipe.pid, "advance")),
              len(kept))
    release = _expr(MBAR_ARRIVE, [ast.BinOp(ast.Constant(empty0), ast.Add(), current)])
    loop.body = kept[:at] + [release] + kept[at:]

    budget = _consumer_registers(threads)
    consumer = ([_expr(SETMAXNREG, [ast.Constant(True), ast.Constant(budget)])]
                + consumer_pre + [loop] + body[i_steady + 1:])
    split = ast.If(_call(WS_PRODUCER), producer, consumer)
    setattr(split, WS_ATTR, True)
    empty_init = _expr(TMA_INIT, [ast.Constant(empty0), ast.Constant(stages), ast.Constant(warps)])
    fdef.body = body[:init[0] + 1] + [empty_init, _expr(SYNC)] + shared + [split]
    return ast.fix_missing_locations(fdef)

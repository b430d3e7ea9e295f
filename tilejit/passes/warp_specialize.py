"""Pass: a TMA pipeline feeding wgmma becomes a producer warpgroup and consumer warpgroups.

After ``tma.py`` a pipelined loop is one program that every thread runs: wait for the
stage, a block barrier (everyone is done with the stage about to be refilled), thread 0
refills it, everyone computes. On sm_90a, when the loop's consumers run a gemm on wgmma,
this pass splits the block instead (FlashAttention-3, CUTLASS's "warp-specialized"
kernels): one more warpgroup is launched after the kernel's ``threads``, whose first
thread only issues copies, and the kernel's own threads only compute; full and empty
mbarriers replace the block barrier:

    ph = 0; init(S full mbarriers, P arrivals); init(S empty, consumer warps); sync()
    if producer():                            # threads >= T (the added warpgroup)
        setmaxnreg.dec(R_producer)
        if leader():                          # thread T
            fence.proxy.async; eph = (1 << S) - 1; ps = 0
            <the name assignments and the loops/ifs that lead to the pipeline>
                for k in range(n):
                    wait(empty[ps], (eph >> ps) & 1); eph ^= 1 << ps
                    tma_load(<producers at k> → stage ps, full[ps]); ps = (ps + 1) % S
    else:                                     # threads < T
        setmaxnreg.inc(R_consumer); cs = 0
        <the kernel's statements, the pipeline's prologue removed, and in place of the loop>
                for k in range(n):
                    wait(full[cs], (ph >> cs) & 1); ph ^= 1 << cs
                    <consumers>               # the gemm returns with its reads complete
                    arrive(empty[cs])         # lane 0 of each warp
                    cs = (cs + 1) % S

The empty barrier of a stage completes once every consumer warp has passed the gemm's
``wgmma.wait_group`` of that stage: the refill never overwrites bytes still being read
(the release the previous, unkept experiment lacked: ``tma.py``). A fresh mbarrier
passes a wait on parity 1 (its "preceding phase"), so ``eph`` starts with every bit set
and the first S loads do not wait. The stage counters and phases run on across runs of
the loop: a pipeline inside ``T.Persistent``'s loop over tiles keeps its ring going from
one tile to the next, so the producer loads the next tile while the consumers store this
one. The barrier pass then treats the producer's branch as synchronized by the mbarriers
and gives the consumers' branch named barriers of their own (``SYNC_CONSUMERS``); the
kernel is launched with ``T + 128`` threads and its entry caps registers
(``nvvm.minctasm`` 1) so that ``setmaxnreg`` takes effect.

It applies to one pipelined loop, at the top level of the kernel's body or inside
``for`` and ``if`` statements, whose copies all became TMA's, whose consumers contain a
gemm planned on wgmma and cannot ``continue`` past the release, in a block of whole
warpgroups with room for one more, when every name the producer's copy of the
statements reads is computed there too, and when the registers a thread of the larger
block is launched with leave room for a wgmma on the largest fragment (``.maxntid``
caps every thread's registers: three consumer warpgroups of 128-word accumulators, 512
threads, 128 registers, is a kernel ptxas refuses). ``T.no_set_max_nreg()`` (TileLang's
``T.disable_warp_group_reg_alloc()``) in the kernel keeps the registers as launched: no
``setmaxnreg``. ``TILEJIT_WS=0``
(``CompileOptions.warp_specialize``) turns it off. Anything else keeps ``tma.py``'s
schedule.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import (CLUSTER_SYNC, GEMM, MBAR_ARRIVE, SETMAXNREG, SYNC, TMA_FENCE,
                                TMA_INIT, TMA_LOAD, TMA_WAIT, WS_ATTR, WS_LEADER, WS_PRODUCER)
from tilejit.language.tiles import check_max_nreg
from tilejit.passes.named_barriers import uses_named_barriers
from tilejit.passes.pipeline import role_of
from tilejit.passes.register_budget import REQUEST_ATTR, check_register_budget, launch_registers
from tilejit.passes.static_eval import NotStatic, StaticEval

WARPGROUP = 128
# the producer's thread only issues TMA copies: 24 registers (FlashAttention-3's figure)
# leave two consumer warpgroups 240 and three 160 (at 40, 232 and 152: FlashAttention
# with three consumer warpgroups, 192x96 blocks, spilled 56 bytes, 32 at 24)
PRODUCER_REGISTERS = 24


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


class _Rename(syntax.NodeTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Name(self, node):
        return copy.deepcopy(self.new) if node.id == self.old else node


def _wgmma_gemm_in(stmts, plan):
    for stmt in stmts:
        for node in syntax.walk(stmt):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == GEMM and isinstance(node.args[3], ast.Constant)
                    and plan.gemms[node.args[3].value][0].engine == "wgmma"):
                return True
    return False


# registers a wgmma loop needs beside its accumulator (descriptors, addresses, the loop's
# counters and barriers' phases): ptxas asked 154 for a 128-word accumulator
_WGMMA_OVERHEAD = 32


def _largest_fragment(plan) -> int:
    """The 32-bit words a thread holds of the kernel's largest fragment."""
    return max((n for n, _ in plan.register_shares()), default=0)


def _fragment_words(plan) -> int:
    """The 32-bit words a thread holds of all the kernel's fragments and local tiles."""
    return sum(n for n, _ in plan.register_shares())


def _consumer_registers(threads: int) -> int:
    """The consumers' budget (``threads`` consumer threads): ``setmaxnreg`` moves
    registers within the block's allocation at launch, the register file (64 K) spread
    over all its threads, producer included, in units of 8 a thread; the producer's
    given back, shared by the consumer threads, a multiple of 8 and at most 240. Asking
    more than the block holds blocks ``setmaxnreg.inc`` for ever: four consumer
    warpgroups (640 threads, 96 registers each at launch) can take 112, not the 120 the
    whole register file would give (TileLang's issue 2522 hung so)."""
    total = threads + WARPGROUP
    launch = launch_registers(total)
    per = (launch * total - WARPGROUP * PRODUCER_REGISTERS) // threads
    return min(240, per - per % 8)


def _path_to(body, node):
    """[(statement list, index)] from ``body`` down to the list holding ``node``, through
    the bodies of ``for`` and ``if`` statements; None if it is not reached that way."""
    for i, stmt in enumerate(body):
        if stmt is node:
            return [(body, i)]
        if isinstance(stmt, (ast.For, ast.If)):
            inner = _path_to(stmt.body, node)
            if inner is not None:
                return [(body, i)] + inner
    return None


def _find(fdef, pid, role):
    found = [n for n in syntax.walk(fdef) if role_of(n) == (pid, role)]
    return found[0] if len(found) == 1 else None


def _names(stmts, ctx_type):
    return {n.id for s in stmts for n in syntax.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx_type)}


# the kernel's own register counts: (the fixed is_inc or None, the default count or None)
_USER_SETMAXNREG = {T.set_max_nreg: (None, None), T.inc_max_nreg: (1, None),
                    T.dec_max_nreg: (0, None), T.annotate_consumer_reg_alloc: (1, 240),
                    T.annotate_producer_reg_dealloc: (0, 24)}


class _RegisterHints(syntax.NodeTransformer):
    """Takes out ``T.no_set_max_nreg()`` / ``T.disable_warp_group_reg_alloc()``
    statements, counting them, and makes the kernel's own ``T.set_max_nreg(n, inc)`` /
    ``T.inc_max_nreg(n)`` / ``T.dec_max_nreg(n)`` the ``setmaxnreg`` marker (sm_90a; a
    no-op in simulation), noting that the kernel sets registers itself."""

    def __init__(self, ctx, fdef):
        self.ctx, self.found, self.user = ctx, 0, False
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def _value(self, node):
        try:
            return self.static.value(node)
        except NotStatic:
            return ast.unparse(node)          # named in the error as written

    def visit_Expr(self, node):
        call = node.value
        fn = resolve_static(call.func, self.ctx.namespace) if isinstance(call, ast.Call) \
            else None
        if fn is T.no_set_max_nreg:
            if call.args or call.keywords:
                raise self.ctx.error("T.no_set_max_nreg() takes no arguments", node)
            self.found += 1
            return ast.copy_location(ast.Pass(), node)
        if fn in _USER_SETMAXNREG:
            return self._set_max_nreg(node, call, fn)
        return node

    def _set_max_nreg(self, node, call, fn):
        fixed, default = _USER_SETMAXNREG[fn]
        params = ("reg_count",) if fixed is not None else ("reg_count", "is_inc")
        values = dict(zip(params, call.args))
        values.update({k.arg: k.value for k in call.keywords})
        if default is not None:
            values.setdefault("reg_count", ast.Constant(default))
        if set(values) != set(params):
            raise self.ctx.error(f"T.{fn.__name__}({', '.join(params)}) takes "
                                 f"{' and '.join(params)}", node)
        literal = {k: self._value(v) for k, v in values.items()}
        is_inc = fixed if fixed is not None else literal["is_inc"]
        problem = check_max_nreg(literal["reg_count"], is_inc)
        if problem:
            raise self.ctx.error(problem, node)
        target = self.ctx.target
        if target.is_sim:
            new = ast.Pass()
        elif not target.has_wgmma:
            hint = ("; name the arch (arch=\"sm_90a\", get_kernel_source(arch=\"sm_90a\"), "
                    "tilejit.compile(..., target=\"cuda -arch=sm_90a\")): without a CUDA "
                    "device a compile is for sm_90") if target.arch == "sm_90" else ""
            raise self.ctx.error(f"T.{fn.__name__}: setmaxnreg needs sm_90a; the target is "
                                 f"{target.arch}{hint}", node)
        else:
            self.user = True
            new = _expr(SETMAXNREG, [ast.Constant(bool(is_inc)),
                                     ast.Constant(literal["reg_count"])])
        # for check_register_budget: the request as the kernel writes it
        setattr(new, REQUEST_ATTR, (f"`{ast.unparse(call)}` ({'raise' if is_inc else 'lower'}"
                                    f" to {literal['reg_count']})", literal["reg_count"],
                                    bool(is_inc)))
        return ast.copy_location(new, node)


def _scalar_if(st) -> bool:
    """An ``if`` whose branches only assign names (no tile, no call but pure ones)."""
    if not isinstance(st, ast.If):
        return False
    for node in syntax.walk(st):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.If, ast.Assign)):
            return False
        if isinstance(node, ast.Assign) and not all(isinstance(t, ast.Name)
                                                    for t in node.targets):
            return False
        if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Attribute) and node.func.attr in _PURE_CALLS):
            return False
    return True


# what a remap of the block's indices may call (T.ceildiv(n, b), T.min, T.max)
_PURE_CALLS = frozenset(("ceildiv", "min", "max"))


def specialize_warps(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    hints = _RegisterHints(ctx, fdef)
    fdef = hints.visit(fdef)
    check_register_budget(fdef, ctx)          # no setmaxnreg.inc that waits for ever
    keep_registers = hints.found > 0
    plan = ctx.plan
    if hints.user:
        plan.user_setmaxnreg = True       # hand-written warp specialization: left alone
        return fdef
    threads = ctx.threads
    if not (ctx.target.has_wgmma and ctx.options.warp_specialize and plan.tma_copies) \
            or plan.grid_sync:     # a producer of loads only would never reach the barrier
        return fdef
    if uses_named_barriers(fdef, ctx.namespace):
        return fdef     # the kernel's own protocol counts the threads it launched
    if threads % WARPGROUP or threads + WARPGROUP > 1024 or len(ctx.pipelines) != 1:
        return fdef
    pipe = ctx.pipelines[0]
    body = fdef.body
    init = [i for i, s in enumerate(body) if _is_call(s, TMA_INIT)]
    loop, prologue = _find(fdef, pipe.pid, "steady"), _find(fdef, pipe.pid, "prologue")
    if len(init) != 1 or loop is None or prologue is None or pipe.refill_stage is None:
        return fdef     # copies stayed cp.async, or a consumer may `continue` (no release)
    path = _path_to(body, loop)
    if path is None or path[0][1] <= init[0]:
        return fdef
    inner, i_steady = path[-1]
    if prologue not in inner:
        return fdef
    loads = [s for s in syntax.walk(prologue) if _is_call(s, TMA_LOAD)]
    if not loads or not _wgmma_gemm_in(loop.body, plan):
        return fdef
    if _largest_fragment(plan) + _WGMMA_OVERHEAD > launch_registers(threads + WARPGROUP):
        # the producer warpgroup would cap every thread's registers below what a wgmma
        # on the largest accumulator needs live at once (ptxas refuses the kernel:
        # three consumer warpgroups of 128-word accumulators, 512 threads, 128 registers)
        return fdef
    if 4 * _fragment_words(plan) > 5 * _consumer_registers(threads):
        # the consumers' fragments well past what setmaxnreg can give them, where the
        # wgmma accumulators cannot spill (FlashAttention at block 256 x 128, head 128,
        # four consumer warpgroups: 180 words of fragments against 112 registers; ptxas
        # refuses it). Without the producer the kernel keeps its registers. ptxas assigns
        # registers by liveness, so fragments a little over the budget still fit (at
        # 128 x 64 on one warpgroup: 244 words, 240 registers, compiled and fast): the
        # bound is a quarter over.
        return fdef
    seq = ctx.number("ws")
    ps, eph, kk = f"__tj_ps{seq}", f"__tj_eph{seq}", f"__tj_pk{seq}"
    counters = {getattr(pipe.current, "id", None), pipe.refill_stage}
    stages = pipe.stages
    empty0 = plan.mbarriers

    # the producer: the prologue's loads with its index as k (regions) and ps (stages),
    # each stage first waited empty (a fresh mbarrier passes a wait on parity 1)
    p_var = prologue.target.id
    issue = []
    for load in loads:
        call = copy.deepcopy(load.value)
        call.args[0] = _Rename(p_var, _name(kk)).visit(call.args[0])
        call.args[1] = _Rename(p_var, _name(ps)).visit(call.args[1])
        call.args[2] = _Rename(p_var, _name(ps)).visit(call.args[2])
        issue.append(ast.Expr(call))
    stage_free = [
        _expr(TMA_WAIT, [ast.BinOp(ast.Constant(empty0), ast.Add(), _name(ps)),
                         ast.BinOp(ast.BinOp(_name(eph), ast.RShift(), _name(ps)),
                                   ast.BitAnd(), ast.Constant(1)),
                         ast.Constant(False)]),
        _assign(eph, ast.BinOp(_name(eph), ast.BitXor(),
                               ast.BinOp(ast.Constant(1), ast.LShift(), _name(ps))))]
    advance = _assign(ps, ast.IfExp(ast.Compare(_name(ps), [ast.Lt()], [ast.Constant(stages - 1)]),
                                    ast.BinOp(_name(ps), ast.Add(), ast.Constant(1)),
                                    ast.Constant(0)))
    producer_loop = ast.For(ast.Name(kk, ast.Store()), _call("range", [_name(pipe.trip_count)]),
                            stage_free + issue + [advance], [], None)

    dropped = []        # statements before the pipeline the producer does not run

    def produce(level):
        """The statements of path level ``level`` the producer runs: the name
        assignments before the pipeline (also under an ``if`` of name assignments only,
        as a block-index remap: ``if causal: bx = nb - 1 - bx``), and the statement
        that leads to it."""
        stmts, i = path[level]
        kept = []
        for st in stmts[:i]:
            if (isinstance(st, ast.Assign) or _scalar_if(st)) and not (
                    _names([st], ast.Store) & counters):
                kept.append(copy.deepcopy(st))
            else:
                dropped.append(st)
        if level == len(path) - 1:
            return kept + [producer_loop]
        lead = copy.copy(stmts[i])
        lead.body = produce(level + 1)
        if isinstance(lead, ast.If):
            lead.orelse = []
        return kept + [lead]

    top = [st for st in body[init[0] + 1:] if not _is_call(st, SYNC)]
    path[0] = (top, path[0][1] - init[0] - 1 - sum(_is_call(st, SYNC)
                                                      for st in body[init[0] + 1:path[0][1]]))
    produced = produce(0)
    # every name the producer reads is a parameter, a global, or computed by the producer,
    # and no statement it leaves out changes one (else its loads would differ from the
    # consumers' and the two wait on each other forever)
    stored_anywhere = _names(body, ast.Store)
    stored_by_producer = _names(produced, ast.Store)
    reads = _names(produced, ast.Load)
    if (reads & stored_anywhere) - stored_by_producer - counters or \
            reads & _names(dropped, ast.Store) - counters:
        return fdef
    multicast = _multicast(fdef, plan, loads)
    plan.mbarriers += stages
    plan.ws_consumers = threads
    plan.tma_issuer = threads
    plan.launch_threads = threads + WARPGROUP
    producer = [_expr(SETMAXNREG, [ast.Constant(False), ast.Constant(PRODUCER_REGISTERS)])][
        keep_registers:] + [
                ast.If(_call(WS_LEADER),
                       [_expr(TMA_FENCE), _assign(eph, ast.Constant((1 << stages) - 1)),
                        _assign(ps, ast.Constant(0))] + produced, [])]

    # the consumers: the program without the prologue; the steady loop without its
    # barrier and refill, releasing its stage; the stage counters run on across runs of
    # the loop (as the producer's do)
    current = copy.deepcopy(pipe.current)
    kept = [st for st in loop.body if not (_is_call(st, SYNC) or _only_loads(st))]
    at = next((i for i, st in enumerate(kept) if role_of(st) == (pipe.pid, "advance")),
              len(kept))
    release = _expr(MBAR_ARRIVE, [ast.BinOp(ast.Constant(empty0), ast.Add(), current)])
    loop.body = kept[:at] + [release] + kept[at:]
    starts = [st for st in inner if isinstance(st, ast.Assign)
              and _names([st], ast.Store) & counters]
    inner[:] = [st for st in inner if st is not prologue and not _is_call(st, TMA_FENCE)
                and not any(st is x for x in starts)]
    top = [st for st in body[init[0] + 1:] if not _is_call(st, SYNC)]
    budget = _consumer_registers(threads)
    consumer = ([_expr(SETMAXNREG, [ast.Constant(True), ast.Constant(budget)])][keep_registers:]
                + starts + top)
    split = ast.If(_call(WS_PRODUCER), producer, consumer)
    setattr(split, WS_ATTR, True)
    # with multicast loads, every consumer warp of the cluster releases each block's stage
    releases = threads // 32 * (plan.cluster_blocks if multicast else 1)
    empty_init = _expr(TMA_INIT, [ast.Constant(empty0), ast.Constant(stages),
                                  ast.Constant(releases)])
    fdef.body = body[:init[0] + 1] + [empty_init, _expr(SYNC), split]
    if multicast:
        # the peers' mbarriers are initialized before any load lands in them, and no
        # block exits while a peer may still write its stages or arrive on its mbarriers
        fdef.body[-1:-1] = [_expr(CLUSTER_SYNC)]
        fdef.body.append(_expr(CLUSTER_SYNC))
    return syntax.fix_missing_locations(fdef)


def _multicast(fdef, plan, loads) -> bool:
    """Whether the pipeline issues its ``T.copy_cluster`` loads once for the cluster
    (``plan.multicast``): when every such load's mask is the whole cluster (so every block
    runs the same pipeline steps, which the simulator checks) and the kernel has no
    ``return`` (each block must reach the cluster barrier at its end). Otherwise each
    block loads its own copy, the same bytes."""
    full = (1 << plan.cluster_blocks) - 1
    masks = {plan.tma_copies[load.value.args[4].value].multicast for load in loads} - {0}
    plan.multicast = (plan.cluster_blocks > 1 and masks == {full}
                      and not any(isinstance(n, ast.Return) for n in syntax.walk(fdef)))
    return plan.multicast

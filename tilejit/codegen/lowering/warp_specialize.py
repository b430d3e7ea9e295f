"""Lowering of warp specialization's operations (``passes/warp_specialize.py``), NVPTX.

The producer warpgroup is the one after the consumers' ``plan().ws_consumers``
threads; its first thread issues the copies (``plan().tma_issuer``). ``setmaxnreg``
moves registers between warpgroups (sm_90a; every thread of the warpgroup executes it,
in a kernel whose entry caps registers: ``nvvm.maxntid`` with ``nvvm.minctasm`` 1). The
consumers synchronize among themselves on named barrier 1 (``bar.sync 1, N``), never
on barrier 0, which would wait for the producer. Consumer warpgroup g takes its turn at
the exponentials on named barrier ``TURN_BARRIER + g`` (``passes/softmax_turns.py``).
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.language.hopper import WARPGROUP_THREADS
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, plan
from tilejit.codegen.lowering.tma import mbarrier


def asm_statement(builder, text, constraints="", args=()):
    """A side-effecting, memory-clobbering PTX statement (``warp_roles.py`` uses it too)."""
    fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
    constraints = (constraints + ",~{memory}") if constraints else "~{memory}"
    builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), list(args))


@lower(markers.stub(markers.WS_PRODUCER), target="cuda")
def ws_producer_impl(context, builder, sig, args):
    return builder.icmp_unsigned(">=", context.thread_index(builder), I32(plan().ws_consumers))


@lower(markers.stub(markers.WS_LEADER), target="cuda")
def ws_leader_impl(context, builder, sig, args):
    return builder.icmp_unsigned("==", context.thread_index(builder), I32(plan().tma_issuer))


@lower(markers.stub(markers.SETMAXNREG), types.BooleanLiteral, types.IntegerLiteral,
       target="cuda")
def setmaxnreg_impl(context, builder, sig, args):
    way = "inc" if sig.args[0].literal_value else "dec"
    asm_statement(builder, f"setmaxnreg.{way}.sync.aligned.u32 {sig.args[1].literal_value};")
    return context.get_dummy_value()


@lower(markers.stub(markers.MBAR_ARRIVE), types.int32, target="cuda")
def mbar_arrive_impl(context, builder, sig, args):
    """Lane 0 of each warp arrives: the warp's reads of the stage have completed (its
    wgmma ``wait_group`` came before)."""
    lane = builder.and_(context.thread_index(builder), I32(31))
    bar = mbarrier(builder, args[0])
    with builder.if_then(builder.icmp_unsigned("==", lane, I32(0))):
        if not plan().multicast:
            asm_statement(builder, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", [bar])
        else:       # multicast loads: the stage is released in every block of the cluster
            for rank in range(plan().cluster_blocks):
                asm_statement(builder, "{ .reg .b32 tjra; mapa.shared::cluster.u32 tjra, $0, $1; "
                              "mbarrier.arrive.shared::cluster.b64 _, [tjra]; }",
                              "r,r", [bar, I32(rank)])
    return context.get_dummy_value()


@lower(markers.stub(markers.SYNC_CONSUMERS), target="cuda")
def sync_consumers_impl(context, builder, sig, args):
    if plan().proxy_fence:
        asm_statement(builder, "fence.proxy.async.shared::cta;")
    asm_statement(builder, f"bar.sync 1, {plan().ws_consumers};")
    return context.get_dummy_value()


TURN_BARRIER = 2        # warpgroup g's turn: named barrier 2 + g (1 is the consumers')
_TURN_THREADS = 2 * WARPGROUP_THREADS   # the warpgroup that waits, the one handing over


def _consumer_group(context, builder):
    """(this thread's consumer warpgroup, the number of consumer warpgroups)."""
    shift = WARPGROUP_THREADS.bit_length() - 1          # the index >> 7
    return (builder.lshr(context.thread_index(builder), I32(shift)),
            plan().ws_consumers // WARPGROUP_THREADS)


@lower(markers.stub(markers.TURN), types.IntegerLiteral, target="cuda")
def turn_impl(context, builder, sig, args):
    """START: the last consumer warpgroup hands warpgroup 0 its first turn; WAIT: this
    warpgroup waits for its turn; FINISH: warpgroup 0 takes the handover that follows
    the last turn, so that every arrival is matched when the kernel ends."""
    step = sig.args[0].literal_value
    group, groups = _consumer_group(context, builder)
    if step == markers.TURN_WAIT:
        asm_statement(builder, f"bar.sync $0, {_TURN_THREADS};", "r",
                      [builder.add(group, I32(TURN_BARRIER))])
        return context.get_dummy_value()
    start = step == markers.TURN_START
    with builder.if_then(builder.icmp_unsigned("==", group, I32(groups - 1 if start else 0))):
        asm_statement(builder, f"bar.{'arrive' if start else 'sync'} {TURN_BARRIER}, "
                               f"{_TURN_THREADS};")
    return context.get_dummy_value()


def turn_handover(context, builder, values):
    """Hand the turn at the exponentials to the next consumer warpgroup (``bar.arrive``),
    from a row sum's lowering (``reductions.py``) once this thread's partial sums
    (``values``, 32-bit) are computed. The barrier id is computed in the PTX from their
    bits, ``max(bits & 1, id)``: always ``id`` (``TURN_BARRIER`` is 2 or more), but ptxas
    must compute every partial first, and with them every exponential they sum, instead
    of sinking those below the arrival."""
    bits = None
    for value in values:
        value = builder.bitcast(value, ir.IntType(32)) if value.type != I32(0).type else value
        bits = value if bits is None else builder.or_(bits, value)
    group, groups = _consumer_group(context, builder)
    following = builder.urem(builder.add(group, I32(1)), I32(groups))
    asm_statement(builder, "{ .reg .b32 tjt; and.b32 tjt, $0, 1; max.u32 tjt, tjt, $1; "
                           f"bar.arrive tjt, {_TURN_THREADS}; }}", "r,r",
                  [bits, builder.add(following, I32(TURN_BARRIER))])

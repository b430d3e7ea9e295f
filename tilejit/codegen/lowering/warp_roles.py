"""Lowering of a kernel's own warpgroup roles (``passes/warp_roles.py``), NVPTX.

Role k is warpgroup k, threads ``128 k … 128 k + 127`` (or, for the front end's roles of
narrower branches, ``R k …`` with R = ``plan.role_threads``, 64 or 32); the tiles are
planned over one role, and ``context.thread_index`` is the index within it. A role's
statements synchronize among themselves on named barrier ``1 + k`` (``bar.sync 1 + k, R``),
never on barrier 0, which waits for the whole block. ``T.mbarrier_arrive`` is every
thread's arrival, as the barrier counts them (``T.alloc_barrier([128, ...])``).
"""
from __future__ import annotations

from numba.core import types

from tilejit.ir import markers
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, plan
from tilejit.codegen.lowering.tma import mbarrier
from tilejit.codegen.lowering.warp_specialize import asm_statement

ROLE_THREADS = 128


@lower(markers.stub(markers.WS_ROLE), target="cuda")
def ws_role_impl(context, builder, sig, args):
    size = plan().role_threads or ROLE_THREADS        # a power of two: 128, 64 or 32
    return builder.lshr(context.block_thread_index(builder), I32(size.bit_length() - 1))


@lower(markers.stub(markers.SYNC_ROLE), types.IntegerLiteral, target="cuda")
def sync_role_impl(context, builder, sig, args):
    if plan().proxy_fence:
        asm_statement(builder, "fence.proxy.async.shared::cta;")
    size = plan().role_threads or ROLE_THREADS
    asm_statement(builder, f"bar.sync {1 + sig.args[0].literal_value}, {size};")
    return context.get_dummy_value()


@lower(markers.stub(markers.SYNC_RANGE), types.IntegerLiteral, types.IntegerLiteral,
       target="cuda")
def sync_range_impl(context, builder, sig, args):
    """The named barrier of a range of threads (``passes/thread_ranges.py``)."""
    barrier, threads = (a.literal_value for a in sig.args)
    asm_statement(builder, f"bar.sync {barrier}, {threads};")
    return context.get_dummy_value()


def _named_barrier(instruction):
    def impl(context, builder, sig, args):
        """The kernel's named barrier (``passes/barriers.py``): ``barrier.sync`` /
        ``barrier.arrive`` without ``.aligned``, as the threads of a warp may reach it
        from different branches."""
        barrier, threads = (context.cast(builder, v, t, types.int32)
                            for v, t in zip(args, sig.args))
        if plan().proxy_fence:      # generic writes wgmma may read next (async_proxy.py)
            asm_statement(builder, "fence.proxy.async.shared::cta;")
        asm_statement(builder, f"{instruction} $0, $1;", "r,r", [barrier, threads])
        return context.get_dummy_value()
    return impl


lower(markers.stub(markers.SYNC_NAMED), types.Integer, types.Integer,
      target="cuda")(_named_barrier("barrier.sync"))
lower(markers.stub(markers.ARRIVE_NAMED), types.Integer, types.Integer,
      target="cuda")(_named_barrier("barrier.arrive"))


@lower(markers.stub(markers.MBAR_ARRIVE_ALL), types.int32, types.IntegerLiteral, target="cuda")
def mbar_arrive_all_impl(context, builder, sig, args):
    """``T.mbarrier_arrive``: each thread's arrival (1); the warp's, once its lanes are
    all there, by lane 0 (32: ``bar.warp.sync`` orders their earlier accesses first); or
    the role's by its one running thread (128: ``passes/warp_roles.py`` elected it)."""
    count = sig.args[1].literal_value
    bar = mbarrier(builder, args[0])
    if count == 1:
        asm_statement(builder, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", [bar])
        return context.get_dummy_value()
    if count == 32:
        asm_statement(builder, "bar.warp.sync -1;")
        lane = builder.and_(context.thread_index(builder), I32(31))
        with builder.if_then(builder.icmp_unsigned("==", lane, I32(0))):
            asm_statement(builder, "mbarrier.arrive.shared::cta.b64 _, [$0], $1;", "r,r",
                 [bar, I32(32)])
        return context.get_dummy_value()
    asm_statement(builder, "mbarrier.arrive.shared::cta.b64 _, [$0], $1;", "r,r",
                  [bar, I32(count)])
    return context.get_dummy_value()


@lower(markers.stub(markers.ROLE_LEADER), target="cuda")
def role_leader_impl(context, builder, sig, args):
    return builder.icmp_unsigned("==", context.thread_index(builder), I32(0))

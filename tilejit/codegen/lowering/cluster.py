"""Lowering of the cluster operations (``passes/clusters.py``), NVPTX.

A block's rank is ``%cluster_ctarank``; the cluster barrier is ``barrier.cluster``'s
arrive (release) and wait (acquire) by every thread of every block of the cluster. A
kernel without clusters has rank 0 (AMDGPU has none).
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, plan


def cluster_rank(builder) -> ir.Value:
    """This block's rank in its cluster (an i32)."""
    if plan().cluster == (1, 1, 1):
        return I32(0)
    fnty = ir.FunctionType(I32, [])
    return builder.call(ir.InlineAsm(fnty, "mov.u32 $0, %cluster_ctarank;", "=r"), [])


@lower(markers.stub(markers.CLUSTER_RANK), target="cuda")
def cluster_rank_impl(context, builder, sig, args):
    return cluster_rank(builder)


@lower(markers.stub(markers.CLUSTER_RANK), target="amdgpu")
def cluster_rank_amdgpu_impl(context, builder, sig, args):
    return I32(0)


def _asm(builder, text):
    fnty = ir.FunctionType(ir.VoidType(), [])
    builder.call(ir.InlineAsm(fnty, text, "~{memory}", side_effect=True), [])


@lower(markers.stub(markers.CLUSTER_SYNC), target="cuda")
def cluster_sync_impl(context, builder, sig, args):
    _asm(builder, "barrier.cluster.arrive.release; barrier.cluster.wait.acquire;")
    return context.get_dummy_value()


@lower(markers.stub(markers.CLUSTER_ARRIVE), types.BooleanLiteral, target="cuda")
def cluster_arrive_impl(context, builder, sig, args):
    relaxed = sig.args[0].literal_value
    _asm(builder, f"barrier.cluster.arrive.{'relaxed' if relaxed else 'release'};")
    return context.get_dummy_value()


@lower(markers.stub(markers.CLUSTER_WAIT), target="cuda")
def cluster_wait_impl(context, builder, sig, args):
    _asm(builder, "barrier.cluster.wait.acquire;")
    return context.get_dummy_value()

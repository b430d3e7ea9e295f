"""Lowering of a thread's own asynchronous copies (``language/cp_async.py``), NVPTX.

``__tj_cp_async`` is one ``cp.async`` of 4, 8 (``.ca``) or 16 bytes (``.cg``, L2 only)
from the source element's address to the destination's, its source size 0 where the
predicate is false (the bytes are written as zeros and nothing is read).
``T.cp_async_barrier_noinc(b)`` is ``cp.async.mbarrier.arrive.noinc``: the mbarrier sees
this thread's arrival once its earlier copies have landed, an arrival the barrier's count
includes. ``T.ptx_commit_group`` and ``T.ptx_wait_group(n)`` are ``cp.async.commit_group``
and ``cp.async.wait_group n``.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.ir import markers
from tilejit.codegen.lowering.atomics import element_ptr
from tilejit.codegen.lowering.copy_sides import cp_async
from tilejit.codegen.lowering.registry import lower
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.lowering.tiles import I32, intrinsic, plan
from tilejit.errors import CompileError
from tilejit.layouts.layout import offset_table
from tilejit.codegen.lowering.tma import mbarrier
from tilejit.codegen.lowering.warp_specialize import asm_statement


def _check_runs(ty, n):
    """The destination tile's layout keeps every run of ``n`` elements that starts at a
    multiple of ``n`` along its last dimension (what a copy may start at: the simulator
    checks it) in ``n`` consecutive, ``n``-aligned offsets; a swizzle of 16-byte chunks
    does, a layout that moves elements one by one does not."""
    t = plan().tile(ty.tile_name)
    offsets = offset_table(t.layout, tuple(t.shape))
    runs = offsets.reshape(-1, n) if t.shape[-1] % n == 0 else None
    if runs is None or not (np.all(runs[:, 0] % n == 0)
                            and np.all(np.diff(runs, axis=1) == 1)):
        raise CompileError(f"T.ptx_cp_async: shared tile {ty.tile_name}'s layout "
                           f"({t.layout}) does not keep runs of {n} elements of a row "
                           f"together, which one cp.async writes; give it a layout that "
                           f"does (T.annotate_layout) or copy fewer elements at once")


@lower(markers.stub(markers.CP_ASYNC), *[types.Any] * 6, target="cuda")
def cp_async_impl(context, builder, sig, args):
    dst_ty, d_index_ty, src_ty, s_index_ty, n_ty, pred_ty = sig.args
    dst, d_index, src, s_index, _, pred = args
    nbytes = n_ty.literal_value * dst_ty.dtype.bits // 8
    _check_runs(dst_ty, n_ty.literal_value)
    sptr = element_ptr(context, builder, dst_ty, dst, d_index_ty, d_index)
    gptr = element_ptr(context, builder, src_ty, src, s_index_ty, s_index)
    on = context.cast(builder, pred, pred_ty, types.boolean)
    size = builder.select(on, I32(nbytes), I32(0))
    cp_async(builder, sptr, gptr, nbytes, size)
    return context.get_dummy_value()


@lower(T.cp_async_barrier_noinc, types.int32, target="cuda")
def cp_async_arrive_impl(context, builder, sig, args):
    asm_statement(builder, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r",
                  [mbarrier(builder, args[0])])
    return context.get_dummy_value()


@lower(T.ptx_commit_group, target="cuda")
def commit_group_impl(context, builder, sig, args):
    builder.call(intrinsic(builder, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), []), [])
    return context.get_dummy_value()


@lower(T.fence_proxy_async, target="cuda")
def fence_proxy_async_impl(context, builder, sig, args):
    """The kernel's own ``fence.proxy.async`` (``language/hopper.py``)."""
    asm_statement(builder, "fence.proxy.async.shared::cta;")
    return context.get_dummy_value()


def _griddepcontrol(context, builder, text):
    """Programmatic dependent launch (``language/hopper.py``): ``griddepcontrol`` on
    sm_90+ (PTX 7.8), nothing before it and on AMDGPU."""
    target = current_kernel().target
    if target.is_cuda and target.sm >= 90:
        asm_statement(builder, text)
    return context.get_dummy_value()


@lower(T.pdl_trigger, target="cuda")
@lower(T.pdl_trigger, target="amdgpu")
def pdl_trigger_impl(context, builder, sig, args):
    return _griddepcontrol(context, builder, "griddepcontrol.launch_dependents;")


@lower(T.pdl_sync, target="cuda")
@lower(T.pdl_sync, target="amdgpu")
def pdl_sync_impl(context, builder, sig, args):
    return _griddepcontrol(context, builder, "griddepcontrol.wait;")


@lower(T.ptx_wait_group, types.IntegerLiteral, target="cuda")
def wait_group_impl(context, builder, sig, args):
    fn = intrinsic(builder, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
    builder.call(fn, [I32(sig.args[0].literal_value)])
    return context.get_dummy_value()

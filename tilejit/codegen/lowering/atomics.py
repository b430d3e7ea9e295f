"""Atomics in LLVM IR: ``atomicrmw`` on a global (addrspace 1) or shared (addrspace 3)
element, ``monotonic`` (PTX ``.relaxed``) ordering by default.

``memory_order`` (TileLang's): None and ``"relaxed"`` are today's ``monotonic``
atomicrmw, unchanged (no syncscope: PTX ``atom.global.add.u32``, relaxed at GPU
scope). The others become an atomicrmw of that LLVM ordering at
``syncscope("device")`` (consume as acquire), and, because the NVPTX backend of the
LLVM we build with drops the ordering of an ``atomicrmw`` (it emits the plain
``atom.``; it honours ``cmpxchg``'s and ``fence``'s), the PTX memory model's fence
mapping around it: a release fence before (``fence.acq_rel.gpu``; ``fence.sc.gpu``
for seq_cst) for release, acq_rel and seq_cst, an acquire fence after
(``fence.acq_rel.gpu``) for consume, acquire, acq_rel and seq_cst. The compare-and-swap
loops LLVM expands (float max/min, bf16 adds on sm_80) carry the ordering
(``atom.acquire.gpu.global.cas``…). The vector ``red.global.add.v*.f32`` of region adds
is used for relaxed adds only.

    op     float16/bfloat16/float32/float64     int32/int64     uint32/uint64
    add    fadd                                 add             add
    max    fmax (llvm.maxnum: NaN ignored)      max             umax
    min    fmin (llvm.minnum: NaN ignored)      min             umin
    or     (integers only)                      or              or

The NVPTX backend emits ``atom.add`` for f32/f64/f16 and, from sm_90, bf16 (on sm_80
``fadd bfloat`` becomes a 32-bit compare-and-swap loop), ``atom.max/min`` for the
integers, and a compare-and-swap loop for ``fmax``/``fmin`` (PTX has no float atomic
max/min below sm_90's ``.bf16``/``.f16`` forms). A statement that drops the result is
turned into ``red.`` by ptxas where it can.

Element form (``__tj_atomic_*``): inside a T.Parallel every thread performs its own
iterations' atomics; outside one every thread performs it too (``per_lane`` True, the
read-modify-write atomics always: TileLang's semantics), and where ``per_lane`` is False
(a block-level ``T.atomic_load``/``T.atomic_store`` in a kernel that does not read its
thread index) only thread 0 of the block does.
Region form (``T.atomic_*(region, tile)``): a fragment value is combined slot by slot
by the threads that hold it (copy 0 of a replicated fragment only); a shared, local
(each thread its own copy's element) or global value is dealt element by element to the
block's threads, as is a number into every element (TileLang's ``T.atomic_add(B, 1)``);
global elements outside the tensor are skipped.
"""
from __future__ import annotations

import math

from llvmlite import ir
from numba.core import cgutils, types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.ir.regions import RegionError, copy_dims
from tilejit.codegen.typing.tiles import RegionType, TileType
from tilejit.codegen.typing.types import BFloat16, GlobalTensorType
from tilejit.codegen.lowering import copy as _copy
from tilejit.codegen.lowering import copy_sides as sides
from tilejit.codegen.lowering.debug import emit_bounds_check
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tensor import element_pointer
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.lowering.tiles import (SlotMemo, element_offset, fragment_slot, guarded,
                                            plan, rounds, thread_index, unflatten,
                                            writer_guard)

I32, I64 = ir.IntType(32), ir.IntType(64)


class _BFloatType(ir.types.Type):
    """LLVM's ``bfloat`` (llvmlite has no such type); used only around atomicrmw."""

    def __str__(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloatType)

    def __hash__(self):
        return hash("bfloat")


BFLOAT = _BFloatType()


def _rmw_op(op: str, elem) -> str:
    if isinstance(elem, (types.Float, BFloat16)):
        return {"add": "fadd", "max": "fmax", "min": "fmin"}[op]
    if op in ("add", "or"):
        return op
    return ("" if elem.signed else "u") + op


# TileLang's memory orders → LLVM's atomicrmw ordering (None: relaxed)
LLVM_ORDERING = {None: "monotonic", "relaxed": "monotonic", "consume": "acquire",
                 "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
                 "seq_cst": "seq_cst"}


def _scope() -> str:
    """The device's syncscope (``Target.device_scope``: PTX ``.gpu``, AMDGPU's agent)."""
    return current_kernel().target.device_scope


def _fences(order):
    """(the fence before, the fence after) an atomic of ``order``: LLVM orderings or None."""
    ordering = LLVM_ORDERING[order]
    before = {"release": "release", "acq_rel": "release", "seq_cst": "seq_cst"}.get(ordering)
    after = "acquire" if ordering in ("acquire", "acq_rel", "seq_cst") else None
    return before, after


def memory_order_of(ty):
    """The memory order a typed ``memory_order`` operand holds: None or its string."""
    return getattr(ty, "literal_value", None)


def atomic_rmw(builder, op: str, elem, ptr, value, order=None):
    """``atomicrmw`` of ``value`` (the element's value type) at ``ptr`` with TileLang's
    memory ``order``; the old value."""
    ordering = LLVM_ORDERING[order]
    if ordering != "monotonic":
        ordering = f'syncscope("{_scope()}") {ordering}'
    before, after = _fences(order)
    if before:
        builder.fence(before, _scope())
    if isinstance(elem, BFloat16):
        bf = builder.bitcast(value, BFLOAT)
        bptr = builder.bitcast(ptr, ir.PointerType(BFLOAT, ptr.type.addrspace))
        old = builder.bitcast(builder.atomic_rmw(_rmw_op(op, elem), bptr, bf, ordering),
                              value.type)
    else:
        old = builder.atomic_rmw(_rmw_op(op, elem), ptr, value, ordering)
    if after:
        builder.fence(after, _scope())
    return old


def element_ptr(context, builder, ty, base, index_ty, index):
    if isinstance(ty, GlobalTensorType):
        return element_pointer(context, builder, ty, base, index_ty, index)
    if isinstance(index_ty, types.BaseTuple):
        values = cgutils.unpack_tuple(builder, index, len(index_ty))
        tys = index_ty.types
    else:
        values, tys = [index], [index_ty]
    coords = [context.cast(builder, v, t, types.int32) for v, t in zip(values, tys)]
    if current_kernel().debug:
        for k, (c, n) in enumerate(zip(coords, ty.shape)):
            emit_bounds_check(builder, builder.sext(c, ir.IntType(64)), ir.IntType(64)(n),
                              f"of shared tile {ty.tile_name}, dimension {k}")
    return builder.gep(base, [element_offset(builder, ty, coords)], inbounds=True)


def atomic_load_store(builder, op: str, ptr, value=None, order=None):
    """``T.atomic_load`` (``op`` "load": the value) or ``T.atomic_store`` of ``value`` at
    ``ptr``: a relaxed atomic access (PTX ``ld/st.relaxed``) with the fences of
    ``order`` around it, as the read-modify-write atomics are ordered."""
    before, after = _fences(order)
    if before:
        builder.fence(before, _scope())
    # on the integer of the element's width: NVPTX's selection of an atomic float load
    # aborts in LLVM's assertions (TileLang's atomic load/store test, float32); the PTX
    # access is .b32/.b64 either way
    element = ptr.type.pointee
    bits = ir.IntType(8 * _width(ptr))
    word = builder.bitcast(ptr, bits.as_pointer(ptr.type.addrspace))
    if op == "load":
        out = builder.load_atomic(word, "monotonic", _width(ptr))
        if element != bits:
            out = builder.bitcast(out, element)
    else:
        if value.type != element:
            value = builder.bitcast(value, element)
        if element != bits:
            value = builder.bitcast(value, bits)
        builder.store_atomic(value, word, "monotonic", _width(ptr))
        out = None
    if after:
        builder.fence(after, _scope())
    return out


def _width(ptr) -> int:
    """The byte size of a 32- or 64-bit element (the alignment of its atomic access)."""
    pointee = ptr.type.pointee
    return 8 if getattr(pointee, "width", 32) == 64 or isinstance(pointee, ir.DoubleType) else 4


def _element_impl(op):
    def impl(context, builder, sig, args):
        dst_ty, index_ty, _, _, per_lane_ty, order_ty = sig.args
        elem = dst_ty.element
        order = memory_order_of(order_ty)
        if op in ("load", "store"):
            def access(ptr):
                return atomic_load_store(builder, op, ptr, args[2], order)
        else:
            def access(ptr):
                return atomic_rmw(builder, op, elem, ptr, args[2], order)
        if per_lane_ty.literal_value or current_kernel().threads == 1:
            # (a block of one thread: its one thread, which returns the previous value)
            ptr = element_ptr(context, builder, dst_ty, args[0], index_ty, args[1])
            old = access(ptr)
        else:
            first = builder.icmp_unsigned("==", thread_index(context, builder), I32(0))
            with builder.if_then(first):
                ptr = element_ptr(context, builder, dst_ty, args[0], index_ty, args[1])
                access(ptr)
            old = None
        if sig.return_type == types.none:
            return context.get_dummy_value()
        return old
    return impl


def _atomic_store(context, builder, op, side, offsets, value, order=None):
    """Combine ``value`` into the element of ``side`` at a copy coordinate (skipped
    outside a global tensor)."""
    if side.kind == "global":
        coords = sides.global_coords(builder, side, offsets)
        with builder.if_then(sides.inside_tensor(builder, side, coords)):
            atomic_rmw(builder, op, side.element, sides.global_pointer(builder, side, coords),
                       value, order)
        return
    ptr = builder.gep(side.value, [sides.tile_offset(builder, side, offsets)], inbounds=True)
    atomic_rmw(builder, op, side.element, ptr, value, order)


def _region_impl(op):
    def impl(context, builder, sig, args):
        what = f"T.atomic_{op}"
        dst = sides.describe(context, builder, sig.args[0], args[0])
        order = memory_order_of(sig.args[2])
        if isinstance(sig.args[1], (types.Number, types.Boolean)):   # into every element
            value = context.cast(builder, args[1], sig.args[1], dst.element)
            _scalar_into(context, builder, op, sig.args[0], dst, value, order)
            return context.get_dummy_value()
        src = sides.describe(context, builder, sig.args[1], args[1])
        if src.extents is None and dst.extents is None:
            # a whole tensor's extents where the specialization knows its shape (a region
            # atomic of whole tensors, T.atomic_add(B, A): frontend/analysis.py)
            src.extents = _extents_from_shape(sig.args[1], src)
        try:
            (src.ranged, src.extents), (dst.ranged, dst.extents), extents = copy_dims(
                (src.ndim, src.ranged, src.extents), (dst.ndim, dst.ranged, dst.extents))
        except RegionError as e:
            raise CompileError(f"{what}: {e}") from None
        if src.kind == "fragment":
            _from_fragment(context, builder, op, src, dst, order)
        else:
            _from_shared(context, builder, op, src, dst, extents, order)
        return context.get_dummy_value()
    return impl


def _from_fragment(context, builder, op, src, dst, order):
    t = plan().tile(src.ty.tile_name)
    width = _vector_red_width(op, dst, t, order)
    if width == 1:
        _fragment_slots(context, builder, op, src, dst, t, None, order)
        return
    # a region wholly inside the tensor with an aligned start (every block's but the
    # edges') adds each run of consecutive slots with one vector reduction; the edges
    # add element by element, each checked
    runs = _copy._slot_runs(t.indexing, plan().threads, tuple(t.shape), width)
    interior = builder.and_(_copy._aligned_start(builder, dst, max(n for _, n in runs)),
                            sides.region_inside(builder, dst, dst.shape))
    with builder.if_else(interior, likely=True) as (inner, edge):
        with inner:
            _fragment_slots(context, builder, op, src, dst, t, runs)
        with edge:
            _fragment_slots(context, builder, op, src, dst, t, None)


def _fragment_slots(context, builder, op, src, dst, t, runs, order=None):
    """This thread's slots combined into ``dst``: one atomic per slot (``runs`` None,
    global elements outside the tensor skipped), or one unchecked vector reduction per
    run of slots."""
    ix = t.indexing
    tid = thread_index(context, builder)
    writer = writer_guard(builder, ix, tid)      # one copy of a replicated fragment adds
    memo = SlotMemo()
    for s0, length in runs or tuple((s, 1) for s in range(ix.slots)):
        tile_coords, guard = fragment_slot(builder, ix, tid, s0, writer, memo)
        cc = [c for c, n in zip(tile_coords, t.shape) if n != 1]
        with guarded(builder, guard):
            values = [context.cast(builder, context.unpack_value(
                builder, src.element, builder.gep(src.value, [I32(s0 + k)])),
                src.element, dst.element) for k in range(length)]
            if runs is None:
                _atomic_store(context, builder, op, dst, sides.side_offsets(dst, cc), values[0],
                              order)
            else:
                _red_vector(builder, dst, sides.side_offsets(dst, cc), values)


def _vector_red_width(op, dst, t, order=None) -> int:
    """Slots per ``red.global.add.v*.f32`` for a fragment added into a global region: up
    to 4 (16 bytes) where the target has vector reductions, the add is relaxed and the
    region's last dimension is the tensor's contiguous one, else 1 (an atomic per
    element)."""
    if (op != "add" or LLVM_ORDERING[order] != "monotonic" or dst.kind != "global"
            or str(dst.dtype) != "float32"
            or t.shape[-1] < 2 or not current_kernel().target.has_vector_red
            or not sides.global_vectorizable(dst, 2)):
        return 1
    return 4


def _red_vector(builder, dst, offsets, values):
    """``red.global.add.v{n}.f32`` of ``values`` at consecutive elements (n of 1 is a
    scalar ``red``)."""
    n = len(values)
    ptr = sides.global_pointer(builder, dst, sides.global_coords(builder, dst, offsets))
    address = builder.ptrtoint(ptr, ir.IntType(64))     # a global address, no cvta
    vec = f".v{n}" if n > 1 else ""
    regs = ", ".join(f"${k + 1}" for k in range(n))
    regs = f"{{{regs}}}" if n > 1 else regs
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)] + [ir.FloatType()] * n)
    asm = ir.InlineAsm(fnty, f"red.global.add{vec}.f32 [$0], {regs};",
                       ",".join(["l"] + ["f"] * n) + ",~{memory}", side_effect=True)
    builder.call(asm, [address] + values)


def _scalar_into(context, builder, op, dst_ty, dst, value, order):
    """A number combined into every element of the destination once, the elements dealt
    round-robin to the block's threads (a whole tensor: its run-time shape; a region:
    its compile-time extents, the edge past the tensor skipped)."""
    if isinstance(dst_ty, RegionType) and not dst.ranged:
        dst.extents, dst.ranged = (), []        # one element
    if dst.extents is None and isinstance(dst_ty, RegionType):
        dst.extents = _extents_from_shape(dst_ty, dst)
    if dst.extents is None and isinstance(dst_ty, RegionType):
        raise CompileError(f"T.atomic_{op}: the region's extent is unknown; slice it (as "
                           f"A[r, 0:n] with n known at compile time)")
    tid = builder.zext(thread_index(context, builder), I64)
    if dst.extents is not None:
        wide = [n for n in dst.extents if n != 1]
        total = I64(math.prod(wide))
    else:
        total = I64(1)
        for n in dst.shape:
            total = builder.mul(total, n)
    with cgutils.for_range_slice(builder, tid, total, I64(plan().threads), inc=True) as (
            flat, _):
        if dst.extents is not None:
            coords = unflatten(builder, builder.trunc(flat, I32), wide)
            _atomic_store(context, builder, op, dst, sides.side_offsets(dst, coords), value, order)
        else:
            ptr = sides.global_pointer(builder, dst, unflatten(builder, flat, dst.shape))
            atomic_rmw(builder, op, dst.element, ptr, value, order)


def _extents_from_shape(ty, side):
    """Extents the specialization's compiled-in shape gives (``frontend/analysis.
    whole_shape_params``): a whole tensor's shape, or a region's whose slices open at their
    end (``X[r0:r1, :]``) run to the tensor's edge from a compile-time start; None where
    one stays unknown."""
    shape = side.static_shape if side.kind == "global" else None
    region = isinstance(ty, RegionType)
    if shape is None or (region and ty.static_starts is None):
        return None
    extents = []
    for d in side.ranged:
        n = ty.extents[d] if region else 0
        start = ty.static_starts[d] if region else 0
        if not n and shape[d] is not None and start is not None:
            n = shape[d] - start
        if not n or n < 0:
            return None
        extents.append(n)
    return tuple(extents)


def _from_shared(context, builder, op, src, dst, extents, order):
    total = 1
    for n in extents:
        total *= n
    for flat, guard in rounds(context, builder, total):
        with guarded(builder, guard):
            cc = unflatten(builder, flat, extents)
            v = _copy.load_element(context, builder, src, sides.side_offsets(src, cc))
            v = context.cast(builder, v, src.element, dst.element)
            _atomic_store(context, builder, op, dst, sides.side_offsets(dst, cc), v, order)


def _register():
    for op in ("load", "store", "or"):
        element = markers.stub(getattr(markers, f"ATOMIC_{op.upper()}"))
        lower(element, *[types.Any] * 6)(_element_impl(op))
    for op in ("add", "max", "min"):
        element = markers.stub(getattr(markers, f"ATOMIC_{op.upper()}"))
        lower(element, *[types.Any] * 6)(_element_impl(op))
        lower(getattr(T, f"atomic_{op}"), *[types.Any] * 4)(_region_impl(op))


_register()
__all__ = ["atomic_rmw", "TileType"]

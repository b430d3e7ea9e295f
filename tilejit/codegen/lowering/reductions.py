"""``T.reduce_*`` and the scans ``T.cumsum`` / ``T.cummax`` in LLVM IR.

Reducing a fragment (any digit layout, ``ir/digits.py``) along a dimension:
1. each thread combines its own slots that land on the same result slot, pairwise (a
   tree of depth log2 n instead of a chain of n - 1 dependent operations: the row max
   of FlashAttention's scores is on the path from one GEMM to the next, and the
   pairwise sum rounds less);
2. ``shfl.xor`` butterflies combine the lanes that hold the same result element (the
   thread digits of the reduced dimension inside a warp);
3. if warps share result elements too, each writes its partials to a shared scratch
   tile (planned by the layout pass), a barrier, each combines every warp's partials,
   a barrier (so the scratch may be reused);
4. with ``clear=False`` the old value of the result is combined in, once.
Values are converted to the compute type first (float32 for 16-bit floats, the
destination's type otherwise). ``max``/``min`` ignore NaN (``llvm.maxnum``), their
identity is NaN, so an all-NaN row gives NaN.

Reducing a shared or local tile: each thread computes the result elements it holds
(its slots of a fragment, its share of a shared tile, all of a local tile) with a loop
over the reduced dimension. ``T.cumsum``: a thread scans each row it owns,
sequentially, in shared memory (a fragment operand goes through a shared scratch tile).
"""
from __future__ import annotations

import dataclasses
import math

from llvmlite import ir
from numba.core import cgutils, types

from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.ir.addressing import digit_indexing, evaluate
from tilejit.ir.digits import DigitLayout, digit_layout, idle_copies, reduce_layout
from tilejit.ir.kernel_config import current_kernel
from tilejit.ir.plan import compute_dtype
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.typing.types import numba_type
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.warp_specialize import turn_handover
from tilejit.codegen.lowering.tiles import (tile_threads_barrier, element_offset, emit, guarded,
                                            intrinsic, nonzero, owned_elements, plan, rounds,
                                            shared_base, thread_index, unflatten)

I32 = ir.IntType(32)


@lower(markers.stub(markers.FRAG_SLOT), types.StringLiteral, types.StringLiteral, types.int32)
def frag_slot_impl(context, builder, sig, args):
    expr = plan().slot_maps[(sig.args[0].literal_value, sig.args[1].literal_value)]
    return emit(builder, expr, {"s": args[2]})


def _compute_type(ty: TileType):
    return numba_type(compute_dtype(ty.dtype))


def _identity(op, ctype):
    lty = ir.DoubleType() if ctype == types.float64 else (
        ir.FloatType() if ctype == types.float32 else ir.IntType(ctype.bitwidth))
    if op in ("sum", "abssum", "absmax_nan", "bitor", "bitxor"):
        return ir.Constant(lty, 0)
    if op == "bitand":
        return ir.Constant(lty, -1)
    if isinstance(ctype, types.Float):
        if op.endswith("_nan"):         # max/minimum propagate NaN: ∓inf is the identity
            return ir.Constant(lty, float("-inf") if op == "max_nan" else float("inf"))
        return ir.Constant(lty, float("nan"))
    op = op.removesuffix("_nan")
    bits = ctype.bitwidth
    return ir.Constant(lty, -(1 << (bits - 1)) if op == "max" else (1 << (bits - 1)) - 1) \
        if op in ("max", "min") else ir.Constant(lty, 0)


_BITWISE = {"bitand": "and_", "bitor": "or_", "bitxor": "xor"}


def _combine(builder, op, a, b, ctype):
    if op in ("sum", "abssum"):
        return builder.fadd(a, b) if isinstance(ctype, types.Float) else builder.add(a, b)
    if op in _BITWISE:
        return getattr(builder, _BITWISE[op])(a, b)
    big = op.removesuffix("_nan") in ("max", "absmax")
    if isinstance(ctype, types.Float):
        # maxnum/minnum ignore NaN; maximum/minimum (PTX max.NaN) propagate it
        kind = ("maximum" if big else "minimum") if op.endswith("_nan") else (
            "maxnum" if big else "minnum")
        name = f"llvm.{kind}.{'f64' if ctype.bitwidth == 64 else 'f32'}"
        return builder.call(intrinsic(builder, name, a.type, [a.type, a.type]), [a, b])
    cmp = builder.icmp_signed(">" if big else "<", a, b)
    return builder.select(cmp, a, b)


def _combine_pairwise(builder, op, values, ctype):
    """``values`` combined as a balanced tree: neighbours first, then their results."""
    while len(values) > 1:
        values = [_combine(builder, op, values[i], values[i + 1], ctype)
                  if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
    return values[0]


def _abs(builder, v, ctype):
    if isinstance(ctype, types.Float):
        name = f"llvm.fabs.{'f64' if ctype.bitwidth == 64 else 'f32'}"
        return builder.call(intrinsic(builder, name, v.type, [v.type]), [v])
    neg = builder.neg(v)
    return builder.select(builder.icmp_signed("<", v, ir.Constant(v.type, 0)), neg, v)


def _lane_exchange(builder, offset):
    """f(x: i32) -> the i32 of lane ``lane ^ offset`` of this warp (NVPTX ``shfl.bfly``)
    or wave (AMDGPU ``ds_bpermute``, whose address is the source lane times 4; the lanes
    of a wave of 64 are consecutive threads of the block)."""
    if current_kernel().target.kind == "amdgpu":
        fn = intrinsic(builder, "llvm.amdgcn.ds.bpermute", I32, [I32, I32])
        tid = builder.call(intrinsic(builder, "llvm.amdgcn.workitem.id.x", I32, []), [])
        lane = builder.and_(tid, I32(63))
        address = builder.shl(builder.xor(lane, I32(offset)), I32(2))
        return lambda x: builder.call(fn, [address, x])
    fn = intrinsic(builder, "llvm.nvvm.shfl.sync.bfly.i32", I32, [I32] * 4)
    mask = present_lanes(builder)
    return lambda x: builder.call(fn, [mask, x, I32(offset), I32(0x1F)])


def present_lanes(builder) -> ir.Value:
    """``shfl.sync``'s member mask: the whole warp, or in the last warp of a block whose
    thread count is not a multiple of 32 the lanes it has (a mask naming a lane that does
    not exist is undefined behaviour; the partners of a reduction's exchanges are threads
    of the block, ``ir/digits.reduce_layout``)."""
    threads = plan().block_threads
    if threads % 32 == 0:
        return ir.Constant(I32, 0xFFFFFFFF)
    if threads < 32:
        return ir.Constant(I32, (1 << threads) - 1)
    tid = builder.call(intrinsic(builder, "llvm.nvvm.read.ptx.sreg.tid.x", I32, []), [])
    last = builder.icmp_unsigned(">=", tid, I32(threads // 32 * 32))
    return builder.select(last, I32((1 << threads % 32) - 1), I32(0xFFFFFFFF))


def _shfl_xor(builder, v, offset):
    return exchange_value(builder, v, _lane_exchange(builder, offset))


def exchange_value(builder, v, exchange):
    """``v`` of another lane, given ``exchange`` (an i32 of this lane → that lane's): a
    32-bit value as one i32, a 64-bit one as two, a 16-bit one zero-extended (also the
    warp primitives' shuffles: ``warp.py``)."""
    ty = v.type
    bits = ty.width if isinstance(ty, ir.IntType) else {
        ir.HalfType: 16, ir.DoubleType: 64}.get(type(ty), 32)
    as_int = ir.IntType(bits)
    x = v if isinstance(ty, ir.IntType) else builder.bitcast(v, as_int)
    if bits == 64:
        lo = builder.trunc(x, I32)
        hi = builder.trunc(builder.lshr(x, as_int(32)), I32)
        lo, hi = exchange(lo), exchange(hi)
        y = builder.or_(builder.zext(lo, as_int), builder.shl(builder.zext(hi, as_int),
                                                              as_int(32)))
    elif bits < 32:
        y = builder.trunc(exchange(builder.zext(x, I32)), as_int)
    else:
        y = exchange(x)
    return y if isinstance(ty, ir.IntType) else builder.bitcast(y, ty)


def _load_value(context, builder, ty, ptr, ctype):
    v = context.unpack_value(builder, ty.element, ptr)
    return context.cast(builder, v, ty.element, ctype)


def _flat(builder, coords, shape):
    out = None
    for c, n in zip(coords, shape):
        out = c if out is None else builder.add(builder.mul(out, I32(n)), c)
    return out if out is not None else I32(0)


def _reduce_fragment(context, builder, sig, args, op, dim, clear, rid):
    src_ty, dst_ty = sig.args[0], sig.args[1]
    st, dt = plan().tile(src_ty.tile_name), plan().tile(dst_ty.tile_name)
    dl = st.layout if isinstance(st.layout, DigitLayout) else digit_layout(st.layout)
    keep = len(dt.shape) == len(st.shape)
    red = (reduce_layout(dl, dim, keep, current_kernel().target.warp_size) if dl is not None
           else None)
    if red is None or red.result != (dt.layout if isinstance(dt.layout, DigitLayout)
                                     else digit_layout(dt.layout)):
        raise CompileError(f"T.reduce_{op}: fragment {dst_ty.tile_name!r} does not have the "
                           f"layout of {src_ty.tile_name!r} reduced along dim {dim}")
    ctype = _compute_type(dst_ty)
    tid = thread_index(context, builder)
    ident = _identity(op, ctype)
    owned = [[] for _ in range(dt.indexing.slots)]   # this thread's values per result slot
    for s in range(st.indexing.slots):
        r = evaluate(red.slot_map, {"s": s})
        v = _load_value(context, builder, src_ty, builder.gep(args[0], [I32(s)]), ctype)
        if op.startswith("abs"):
            v = _abs(builder, v, ctype)
        if st.indexing.valid is not None:
            ok = builder.icmp_unsigned("!=", emit(builder, st.indexing.valid,
                                                  {"t": tid, "s": s}), I32(0))
            v = builder.select(ok, v, ident)
        owned[r].append(v)
    partial = [_combine_pairwise(builder, op, vs, ctype) if vs else ident for vs in owned]
    if rid in plan().turn_handovers:    # the exponentials' row sums (softmax_turns.py)
        turn_handover(context, builder, partial)
    for off in red.lane_offsets:
        partial = [_combine(builder, op, p, _shfl_xor(builder, p, off), ctype) for p in partial]
    # threads past a partial layout's tile (its loops give them no element) hold copies of
    # the result in its digit form, but identity partials: the result is handed to them
    # through the scratch too (``idle_copies``)
    idle = idle_copies(dl, st.indexing.valid is not None, plan().threads)
    if red.warp_digits or idle:
        scratch = plan().tile(plan().scratch[rid])
        base = builder.bitcast(builder.gep(_smem(builder), [I32(0), I32(scratch.offset)]),
                               ir.PointerType(partial[0].type, 3))
        group, place = I32(0), 1
        rotated = emit(builder, dl.thread(), {"t": tid})    # t - base (mod n): the digits'
        for d in red.warp_digits:
            digit = builder.urem(builder.udiv(rotated, I32(d.stride)), I32(d.size))
            group = builder.add(group, builder.mul(digit, I32(place)))
            place *= d.size
        size = math.prod(red.result.shape)
        coords = red.result.coords()
        flats = []
        for r in range(len(partial)):
            cs = [emit(builder, c, {"t": tid, "s": r}) for c in coords]
            flats.append(_flat(builder, cs, red.result.shape))
        # a block wider than the layout holds replicas of its threads (identity
        # partials): only the copy that writes stores, or it would clobber a slot; where
        # the copies are the idle threads of a partial layout as wide as the block, the
        # threads holding a valid slot store
        writer = digit_indexing(dataclasses.replace(dl, threads=plan().threads)).writer
        holds = nonzero(builder, writer, {"t": tid}) if writer else None
        if idle and writer is None:
            for s in range(st.indexing.slots):
                v = nonzero(builder, st.indexing.valid, {"t": tid, "s": s})
                holds = v if holds is None else builder.or_(holds, v)
        with guarded(builder, holds):
            for r, p in enumerate(partial):
                idx = builder.add(builder.mul(group, I32(size)), flats[r])
                builder.store(p, builder.gep(base, [idx]))
        tile_threads_barrier(builder)
        out = []
        for r in range(len(partial)):
            acc = None
            for g in range(red.warp_groups):
                v = builder.load(builder.gep(base, [builder.add(I32(g * size), flats[r])]))
                acc = v if acc is None else _combine(builder, op, acc, v, ctype)
            out.append(acc)
        tile_threads_barrier(builder)
        partial = out
    for r, p in enumerate(partial):
        ptr = builder.gep(args[1], [I32(r)])
        if not clear:
            p = _combine(builder, op, _load_value(context, builder, dst_ty, ptr, ctype), p, ctype)
        context.pack_value(builder, dst_ty.element, context.cast(builder, p, ctype,
                                                                 dst_ty.element), ptr)


def _smem(builder):
    return shared_base(builder)


def _reduce_through_memory(context, builder, sig, args, op, dim, clear, scratch_name):
    """A fragment whose layout has no shuffle pattern: its slots go to a shared scratch
    tile, a barrier, then each result element is reduced from there, a barrier."""
    from numba.core.typing import signature
    src_ty = sig.args[0]
    scratch = plan().tile(scratch_name)
    scratch_ty = TileType("shared", scratch.dtype, scratch.shape, scratch.name)
    base = builder.bitcast(builder.gep(_smem(builder), [I32(0), I32(scratch.offset)]),
                           ir.PointerType(context.get_data_type(scratch_ty.element), 3))
    tile_threads_barrier(builder)
    for coords, ptr, guard in owned_elements(context, builder, src_ty, args[0]):
        with guarded(builder, guard):
            v = _load_value(context, builder, src_ty, ptr, scratch_ty.element)
            builder.store(v, builder.gep(base, [element_offset(builder, scratch_ty, coords)]))
    tile_threads_barrier(builder)
    inner = signature(sig.return_type, scratch_ty, *sig.args[1:])
    _reduce_memory(context, builder, inner, [base] + list(args[1:]), op, dim, clear)
    tile_threads_barrier(builder)


def _reduce_memory(context, builder, sig, args, op, dim, clear):
    """src in shared or local memory: each result element by a loop over dim."""
    src_ty, dst_ty = sig.args[0], sig.args[1]
    st, dt = plan().tile(src_ty.tile_name), plan().tile(dst_ty.tile_name)
    ctype = _compute_type(dst_ty)
    n = st.shape[dim]
    keep = len(dt.shape) == len(st.shape)
    for coords, ptr, guard in owned_elements(context, builder, dst_ty, args[1]):
        with guarded(builder, guard):
            kept = [c for k, c in enumerate(coords) if not (keep and k == dim)]
            acc = cgutils.alloca_once_value(builder, _identity(op, ctype))
            with cgutils.for_range(builder, I32(n)) as loop:
                src_coords = kept[:dim] + [loop.index] + kept[dim:]
                p = builder.gep(args[0], [element_offset(builder, src_ty, src_coords)])
                v = _load_value(context, builder, src_ty, p, ctype)
                if op.startswith("abs"):
                    v = _abs(builder, v, ctype)
                builder.store(_combine(builder, op, builder.load(acc), v, ctype), acc)
            result = builder.load(acc)
            if not clear:
                result = _combine(builder, op, _load_value(context, builder, dst_ty, ptr, ctype),
                                  result, ctype)
            context.pack_value(builder, dst_ty.element,
                               context.cast(builder, result, ctype, dst_ty.element), ptr)


@lower(markers.stub(markers.REDUCE), TileType, TileType, types.StringLiteral, types.IntegerLiteral,
       types.BooleanLiteral, types.IntegerLiteral)
def reduce_impl(context, builder, sig, args):
    op = sig.args[2].literal_value
    dim = sig.args[3].literal_value
    clear = sig.args[4].literal_value
    rid = sig.args[5].literal_value
    src_ty = sig.args[0]
    if src_ty.kind == "fragment":
        if sig.args[1].kind != "fragment":
            raise CompileError(f"T.reduce_{op}: reducing a fragment needs a fragment result; "
                               f"copy the result where it should go afterwards")
        scratch = plan().scratch.get(rid)
        if scratch is not None and scratch.startswith("__tj_redmem"):
            if rid in plan().turn_handovers:    # the other warpgroup would wait forever
                raise CompileError(f"internal: T.reduce_{op} through shared memory cannot "
                                   f"hand over the turn at the exponentials")
            _reduce_through_memory(context, builder, sig, args, op, dim, clear, scratch)
        else:
            _reduce_fragment(context, builder, sig, args, op, dim, clear, rid)
    else:
        _reduce_memory(context, builder, sig, args, op, dim, clear)
    return context.get_dummy_value()


@lower(markers.stub(markers.CUMSUM), TileType, TileType, types.IntegerLiteral, types.BooleanLiteral,
       types.IntegerLiteral, types.StringLiteral)
def cumsum_impl(context, builder, sig, args):
    """T.cumsum (op "sum") and T.cummax ("max"). A fragment operand goes through a
    shared scratch tile (planned by the layout pass): its slots are written there, the
    rows are scanned in place, the result is read back into the destination's slots;
    barriers separate the three steps."""
    src_ty, dst_ty = sig.args[0], sig.args[1]
    dim, reverse = sig.args[2].literal_value, sig.args[3].literal_value
    sid, op = sig.args[4].literal_value, sig.args[5].literal_value
    if "local" in (src_ty.kind, dst_ty.kind) and "fragment" in (src_ty.kind, dst_ty.kind):
        raise CompileError(f"T.cum{op} between a fragment and a local tile is not supported")
    if "fragment" not in (src_ty.kind, dst_ty.kind):
        _scan_rows(context, builder, src_ty, args[0], dst_ty, args[1], dim, reverse, op)
        return context.get_dummy_value()
    scratch = plan().tile(plan().scan_scratch[sid])
    ctype = _compute_type(dst_ty)
    scratch_ty = TileType("shared", scratch.dtype, scratch.shape, scratch.name)
    base = builder.bitcast(builder.gep(_smem(builder), [I32(0), I32(scratch.offset)]),
                           ir.PointerType(context.get_data_type(scratch_ty.element), 3))
    tile_threads_barrier(builder)       # the scratch may still be read by a previous scan
    if src_ty.kind == "fragment":
        for coords, ptr, guard in owned_elements(context, builder, src_ty, args[0]):
            with guarded(builder, guard):
                v = _load_value(context, builder, src_ty, ptr, ctype)
                builder.store(v, builder.gep(base, [element_offset(builder, scratch_ty,
                                                                   coords)]))
        tile_threads_barrier(builder)
        src_ty, src_val = scratch_ty, base
    else:
        src_val = args[0]
    _scan_rows(context, builder, src_ty, src_val, scratch_ty, base, dim, reverse, op)
    tile_threads_barrier(builder)
    if dst_ty.kind == "fragment":
        for coords, ptr, guard in owned_elements(context, builder, dst_ty, args[1]):
            with guarded(builder, guard):
                v = builder.load(builder.gep(base, [element_offset(builder, scratch_ty,
                                                                   coords)]))
                context.pack_value(builder, dst_ty.element,
                                   context.cast(builder, v, ctype, dst_ty.element), ptr)
    else:
        _copy_rows(context, builder, scratch_ty, base, dst_ty, args[1], ctype)
    return context.get_dummy_value()


def _copy_rows(context, builder, src_ty, src, dst_ty, dst, ctype):
    for coords, ptr, guard in owned_elements(context, builder, dst_ty, dst):
        with guarded(builder, guard):
            v = builder.load(builder.gep(src, [element_offset(builder, src_ty, coords)]))
            context.pack_value(builder, dst_ty.element,
                               context.cast(builder, v, ctype, dst_ty.element), ptr)


def _scan_rows(context, builder, src_ty, src, dst_ty, dst, dim, reverse, op):
    """Inclusive scan (``op`` "sum" or "max") along dim: each row by one thread (shared),
    or every row by every thread (local)."""
    t = plan().tile(src_ty.tile_name)
    ctype = _compute_type(dst_ty)
    n = t.shape[dim]
    rows = [e for k, e in enumerate(t.shape) if k != dim]
    total = math.prod(rows)
    own_rows = rounds(context, builder, total) if src_ty.kind == "shared" else (
        (I32(k), None) for k in range(total))
    for row, guard in own_rows:
        with guarded(builder, guard):
            head = unflatten(builder, row, rows)
            acc = cgutils.alloca_once_value(builder, _identity(op, ctype))
            with cgutils.for_range(builder, I32(n)) as loop:
                j = builder.sub(I32(n - 1), loop.index) if reverse else loop.index
                coords = head[:dim] + [j] + head[dim:]
                p = builder.gep(src, [element_offset(builder, src_ty, coords)])
                x = _load_value(context, builder, src_ty, p, ctype)
                v = _combine(builder, op, builder.load(acc), x, ctype)
                builder.store(v, acc)
                q = builder.gep(dst, [element_offset(builder, dst_ty, coords)])
                context.pack_value(builder, dst_ty.element,
                                   context.cast(builder, v, ctype, dst_ty.element), q)

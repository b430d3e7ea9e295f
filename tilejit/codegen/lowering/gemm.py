"""``T.gemm`` on ``mma.sync`` (sm_80+): one rule, unrolled at compile time (a gemm the
layout pass planned on wgmma is lowered by ``wgmma.py``, one planned on AMD's MFMA by
``mfma.py``).

Warp ``w`` of the block owns the C piece ``(wm, wn) = (w % warps_m, w // warps_m)``
(``ir/gemm_plan.py``). For each k step of the instruction (16 for f16/bf16, 8 for tf32,
32 for int8) the warp loads its A registers for each of its ``repeat_m`` row tiles and its
B registers for each of its ``repeat_n`` column tiles, then issues
``repeat_m x repeat_n`` mma instructions on the accumulator registers.

Operands in shared memory are read with ``ldmatrix`` for 16-bit types (``.trans``
where the tile is stored K-major for B or M-major for A^T: each lane supplies the
address of one 16-byte row of an 8x8 matrix, which the swizzled layout keeps
contiguous); tf32 and int8 operands are gathered element by element. An A operand held
in registers (FlashAttention's second gemm) is read slot by slot: the layout pass gave
it the layout in which each thread already holds its mma elements, and the slot of each
register is checked here at every thread.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.ir.gemm_plan import A_OWN_LAYOUT
from tilejit.layouts import mma_fragment
from tilejit.ir.addressing import Var, fragment_indexing, fragment_tables, layout_offset, substitute
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.lowering.copy import emit_copy_async
from tilejit.codegen.lowering.copy_sides import chunks_contiguous
from tilejit.codegen.lowering.ldmatrix import LaneAddresses
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import emit, intrinsic, plan, thread_index, uniform_slot
from tilejit.codegen.lowering.fma_gemm import emit_fma_gemm
from tilejit.codegen.lowering.mfma import emit_mfma_gemm
from tilejit.codegen.lowering.wgmma import emit_wgmma_gemm

I32, F32, HALF2 = ir.IntType(32), ir.FloatType(), ir.VectorType(ir.HalfType(), 2)


@lru_cache(maxsize=None)
def _register_slots(frag, gp, operand):
    """slot[(tile index, k step, element)] of a block fragment holding the C (or A)
    elements of every warp, the same at every thread (checked, for all lanes of all
    warps at once)."""
    # tf32's and int8's A operands have a layout of their own (GemmPlan.a_fragment), in
    # blocks of a k step; the others' are the accumulator's over K, in blocks of 8
    own = operand == "A" and gp.kind in A_OWN_LAYOUT
    mma = mma_fragment(gp.instr, gp.kind, "A" if own else "C")
    inv = mma.inverse()
    width = gp.k_step if own else 8
    if operand == "C":
        tiles = [(rm, rn) for rm in range(gp.repeat_m) for rn in range(gp.repeat_n)]
    else:                  # A in registers: 16 x width blocks over K
        tiles = [(rm, kb) for rm in range(gp.repeat_m) for kb in range(gp.K // width)]
    holder, slot_of = fragment_tables(frag)
    if operand == "A" and gp.transpose_A:     # the fragment holds A^T: look up (k, m)
        holder, slot_of = holder.T, slot_of.T
    warp = np.repeat(np.arange(gp.threads // 32), 32)
    lane = np.tile(np.arange(32), gp.threads // 32)
    thread = lane + 32 * warp
    row0 = (warp % gp.warps_m) * gp.warp_m
    col0 = (warp // gp.warps_m) * gp.warp_n if operand == "C" else 0
    slots = {}
    for e in range(mma.slots_per_thread):
        rc = np.array([inv(x, e) for x in range(32)])[lane]
        for (ti, tj) in tiles:
            row, col = row0 + ti * 16 + rc[:, 0], col0 + tj * (8 if operand == "C" else
                                                                 width) + rc[:, 1]
            slots[(ti, tj, e)] = uniform_slot(frag, (holder, slot_of), thread, row, col,
                                              f"the {operand} fragment", "mma")
    return slots


def _smem_offset(builder, tile, row, col):
    names = [Var("r"), Var("c")]
    return emit(builder, layout_offset(tile.layout, names), {"r": row, "c": col})


def _ldmatrix(builder, ptr, count, trans):
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.b16.p3"
    ret = ir.LiteralStructType([I32] * count)
    fn = intrinsic(builder, name, ret, [ir.PointerType(ir.IntType(8), 3)])
    ptr = builder.bitcast(ptr, ir.PointerType(ir.IntType(8), 3))
    out = builder.call(fn, [ptr])
    return [builder.extract_value(out, k) for k in range(count)]


def _ldmatrix_ok(tile) -> bool:
    """16-byte rows of 8 elements stay contiguous and aligned in the tile's layout."""
    return tile.dtype.itemsize == 2 and chunks_contiguous(tile.layout, tile.shape, 8)


def _pack(context, builder, values, elem_bits):
    """Element data values (i16/i8/i32) into one i32 register."""
    if elem_bits == 32:
        return values[0]
    out = I32(0)
    for k, v in enumerate(values):
        x = builder.zext(builder.bitcast(v, ir.IntType(elem_bits)), I32)
        out = builder.or_(out, builder.shl(x, I32(k * elem_bits)) if k else x)
    return out


def _elem_data(context, builder, tile_ty, value, kind):
    """One element as the bits the mma register holds."""
    if kind == "tf32":
        fn = intrinsic(builder, "llvm.nvvm.f2tf32.rna", I32, [F32])
        return builder.call(fn, [value])
    return context.data_model_manager[tile_ty.element].as_data(builder, value)


class _Warp:
    def __init__(self, context, builder, gp):
        self.context, self.builder, self.gp = context, builder, gp
        tid = thread_index(context, builder)
        self.lane = builder.and_(tid, I32(31))
        warp = builder.lshr(tid, I32(5))
        self.wm = builder.urem(warp, I32(gp.warps_m)) if gp.warps_m > 1 else I32(0)
        self.wn = builder.udiv(warp, I32(gp.warps_m)) if gp.warps_n > 1 else I32(0)
        self.row0 = builder.mul(self.wm, I32(gp.warp_m))
        self.col0 = builder.mul(self.wn, I32(gp.warp_n))


def _a_registers(lanes, w, a_ty, a_ptr, kk):
    """Per row tile rm: the A registers of k step kk (``lanes``: the LaneAddresses of
    an ldmatrix operand, None otherwise)."""
    gp, builder, context = w.gp, w.builder, w.context
    tile = plan().tile(a_ty.tile_name)
    out = []
    if a_ty.kind == "fragment" and gp.kind in A_OWN_LAYOUT:
        # held in the instruction's A layout itself: element e of k step kk is slot e
        # there, 32 // bits of them a register (tf32: one; int8: four)
        slots = _register_slots(tile.layout, gp, "A")
        bits = 32 if gp.kind == "tf32" else 8 * tile.dtype.itemsize
        per_reg = 32 // bits
        for rm in range(gp.repeat_m):
            regs = []
            for r in range(4):
                vals = []
                for e in range(r * per_reg, (r + 1) * per_reg):
                    v = context.unpack_value(builder, a_ty.element,
                                             builder.gep(a_ptr, [I32(slots[(rm, kk, e)])]))
                    vals.append(_elem_data(context, builder, a_ty, v, gp.kind))
                regs.append(_pack(context, builder, vals, bits))
            out.append(regs)
        return out
    if a_ty.kind == "fragment":
        slots = _register_slots(tile.layout, gp, "A")
        per_reg = 4 // tile.dtype.itemsize if gp.kind != "tf32" else 1
        n_regs = 4
        a_mma = mma_fragment(gp.instr, gp.kind, "A")
        # each A register's elements, as (row, col) inside the 16 x k tile -> via C blocks
        a_ix = fragment_indexing(a_mma)
        c_ix = fragment_indexing(mma_fragment(gp.instr, gp.kind, "C"))
        c_slot_of = {}
        for e in range(4):
            rc = tuple(substitute(x, {"t": 0, "s": e}) for x in c_ix.coords)
            c_slot_of[(rc[0].value, rc[1].value)] = e
        for rm in range(gp.repeat_m):
            regs = []
            for r in range(n_regs):
                vals = []
                for j in range(per_reg):
                    e = r * per_reg + j
                    row = substitute(a_ix.coords[0], {"t": 0, "s": e}).value
                    col = substitute(a_ix.coords[1], {"t": 0, "s": e}).value
                    kb, c = (kk * gp.k_step + col) // 8, col % 8
                    ce = c_slot_of[(row, c)]
                    s = slots[(rm, kb, ce)]
                    ptr = builder.gep(a_ptr, [I32(s)])
                    v = context.unpack_value(builder, a_ty.element, ptr)
                    vals.append(_elem_data(context, builder, a_ty, v, gp.kind))
                regs.append(_pack(context, builder, vals, 32 if gp.kind == "tf32" else
                                  8 * tile.dtype.itemsize))
            out.append(regs)
        return out
    if lanes is not None:        # ldmatrix: lane addresses from one base (ldmatrix.py)
        for rm in range(gp.repeat_m):
            out.append(_ldmatrix(builder, lanes.pointer(a_ptr, rm, kk), 4, gp.transpose_A))
        return out
    return [_gather(w, a_ty, a_ptr, "A", rm, kk) for rm in range(gp.repeat_m)]


def _b_registers(lanes, w, b_ty, b_ptr, kk):
    """Per column tile rn: the two B registers of k step kk (``lanes`` as for A)."""
    gp, builder = w.gp, w.builder
    if lanes is not None:        # ldmatrix (.trans where the tile is (K, N))
        out = []
        for rn in range(0, gp.repeat_n, 2):
            count = 4 if rn + 1 < gp.repeat_n else 2    # an odd last column tile: x2
            regs = _ldmatrix(builder, lanes.pointer(b_ptr, rn // 2, kk, count), count,
                             not gp.transpose_B)
            out.append(regs[0:2])
            if count == 4:
                out.append(regs[2:4])
        return out
    return [_gather(w, b_ty, b_ptr, "B", rn, kk) for rn in range(gp.repeat_n)]


def _gather(w, ty, ptr, operand, ti, kk):
    """The registers of one instruction tile, element by element from shared memory."""
    gp, builder, context = w.gp, w.builder, w.context
    tile = plan().tile(ty.tile_name)
    mma = mma_fragment(gp.instr, gp.kind, operand)
    ix = fragment_indexing(mma)
    bits = 32 if gp.kind == "tf32" else 8 * tile.dtype.itemsize
    per_reg = 32 // bits
    regs = []
    for r in range(mma.slots_per_thread // per_reg):
        vals = []
        for j in range(per_reg):
            e = r * per_reg + j
            env = {"t": w.lane, "s": e}
            a, b = (emit(builder, c, env) for c in ix.coords)
            if operand == "A":      # (m, k) inside the 16 x k_step tile
                m = builder.add(builder.add(w.row0, I32(ti * 16)), a)
                k = builder.add(I32(kk * gp.k_step), b)
                rc = (k, m) if gp.transpose_A else (m, k)
            else:                   # (k, n) inside the k_step x 8 tile
                k = builder.add(I32(kk * gp.k_step), a)
                n = builder.add(builder.add(w.col0, I32(ti * 8)), b)
                rc = (n, k) if gp.transpose_B else (k, n)
            origin = gp.a_origin if operand == "A" else gp.b_origin
            rc = [builder.add(x, I32(o)) if o else x for x, o in zip(rc, origin)]
            p = builder.gep(ptr, [_smem_offset(builder, tile, *rc)], inbounds=True)
            v = context.unpack_value(builder, ty.element, p)
            vals.append(_elem_data(context, builder, ty, v, gp.kind))
        regs.append(_pack(context, builder, vals, bits))
    return regs


def _mma(builder, gp, a, b, c):
    if gp.kind == "f16" and gp.dtypes[2] == "float16":
        name = "llvm.nvvm.mma.m16n8k16.row.col.f16.f16"
        ret = ir.LiteralStructType([HALF2, HALF2])
        args = [builder.bitcast(x, HALF2) for x in a + b] + c
        fn = intrinsic(builder, name, ret, [HALF2] * 8)
        out = builder.call(fn, args)
        return [builder.extract_value(out, k) for k in range(2)]
    if gp.kind == "f16":
        name, aty, cty = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", HALF2, F32
        a, b = [builder.bitcast(x, HALF2) for x in a], [builder.bitcast(x, HALF2) for x in b]
    elif gp.kind == "bf16":
        name, aty, cty = "llvm.nvvm.mma.m16n8k16.row.col.bf16", I32, F32
    elif gp.kind == "tf32":
        name, aty, cty = "llvm.nvvm.mma.m16n8k8.row.col.tf32", I32, F32
    elif gp.kind in ("e4m3", "e5m2"):
        return _mma_float8(builder, gp, a, b, c)
    else:
        name, aty, cty = "llvm.nvvm.mma.m16n8k32.row.col.s8", I32, I32
    fn = intrinsic(builder, name, ir.LiteralStructType([cty] * 4), [aty] * 6 + [cty] * 4)
    out = builder.call(fn, a + b + c)
    return [builder.extract_value(out, k) for k in range(4)]


def _mma_float8(builder, gp, a, b, c):
    """sm_89's ``mma.sync.m16n8k32`` on float8 (PTX 8.4; LLVM has no intrinsic for it):
    four A, two B registers of four 8-bit values, four f32 accumulators."""
    ta, tb = gp.dtypes[0][7:], gp.dtypes[1][7:]
    text = (f"mma.sync.aligned.m16n8k32.row.col.f32.{ta}.{tb}.f32 {{$0, $1, $2, $3}}, "
            "{$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
    fnty = ir.FunctionType(ir.LiteralStructType([F32] * 4), [I32] * 6 + [F32] * 4)
    asm = ir.InlineAsm(fnty, text, ",".join(["=f"] * 4 + ["r"] * 6 + ["f"] * 4))
    out = builder.call(asm, a + b + c)
    return [builder.extract_value(out, k) for k in range(4)]


class _Accumulator:
    """The C registers of one warp's (rm, rn) tiles: loaded, passed to mma, stored."""

    def __init__(self, context, builder, gp, c_ty, c_ptr):
        self.builder, self.gp, self.ptr = builder, gp, c_ptr
        self.slots = _register_slots(plan().tile(c_ty.tile_name).layout, gp, "C")
        self.half = gp.dtypes[2] == "float16"

    def mma(self, rm, rn, a, b):
        self.apply(rm, rn, lambda c: _mma(self.builder, self.gp, a, b, c))

    def apply(self, rm, rn, instruction):
        """Tile (rm, rn)'s registers through ``instruction(c) -> d`` (f32 values, or
        half2 vectors for a float16 accumulator) and stored back."""
        builder = self.builder
        ptrs = [builder.gep(self.ptr, [I32(self.slots[(rm, rn, e)])]) for e in range(4)]
        vals = [builder.load(p) for p in ptrs]
        if self.half:
            packed = []
            for k in (0, 2):
                v = ir.Constant(HALF2, None)
                v = builder.insert_element(v, vals[k], I32(0))
                v = builder.insert_element(v, vals[k + 1], I32(1))
                packed.append(v)
            vals = packed
        d = instruction(vals)
        if self.half:
            d = [builder.extract_element(d[k // 2], I32(k % 2)) for k in range(4)]
        for p, v in zip(ptrs, d):
            builder.store(v, p)


def _step_mmas(acc, gp, operands):
    """The repeat_m x repeat_n mma of one k step; the order snakes through the warp's
    tiles so consecutive instructions share an A or a B operand."""
    a_regs, b_regs = operands
    for rm in range(gp.repeat_m):
        cols = range(gp.repeat_n) if rm % 2 == 0 else reversed(range(gp.repeat_n))
        for rn in cols:
            acc.mma(rm, rn, a_regs[rm], b_regs[rn])


def _operand_loader(context, builder, gp, a_ty, a_ptr, b_ty, b_ptr):
    """operands(kk): the A and B registers of k step kk (ldmatrix where it applies, its
    lane addresses from one base per operand: ldmatrix.py)."""
    load_a, load_b = operand_loaders(context, builder, gp, a_ty, a_ptr, b_ty, b_ptr)

    def operands(kk):
        return load_a(kk), load_b(kk)
    return operands


def operand_loaders(context, builder, gp, a_ty, a_ptr, b_ty, b_ptr, a_steps=None):
    """(load_a(kk), load_b(kk)): the A registers per row tile and the B registers per
    column tile of k step kk; ``a_steps``: A's k steps where they are not B's (a sparse
    gemm's compressed A, ``sparse_gemm.py``)."""
    w = _Warp(context, builder, gp)
    env = {"lane": w.lane, "row0": w.row0, "col0": w.col0}
    steps = gp.K // gp.k_step
    lanes = []
    for ty, operand, n_i, n_kk in ((a_ty, "A", gp.repeat_m, a_steps or steps),
                                   (b_ty, "B", gp.repeat_n // 2, steps)):
        tile = plan().tile(ty.tile_name)
        origin = gp.a_origin if operand == "A" else gp.b_origin
        # a region's 16-byte rows stay aligned where its first column is on one
        use = (ty.kind != "fragment" and gp.kind in ("f16", "bf16") and _ldmatrix_ok(tile)
               and origin[1] % 8 == 0)
        lanes.append(LaneAddresses(builder, tile, gp, operand, max(n_i, 1), n_kk, env)
                     if use else None)
    return (lambda kk: _a_registers(lanes[0], w, a_ty, a_ptr, kk),
            lambda kk: _b_registers(lanes[1], w, b_ty, b_ptr, kk))


@lower(markers.stub(markers.GEMM), TileType, TileType, TileType, types.StringLiteral, target="cuda")
@lower(markers.stub(markers.GEMM), TileType, TileType, TileType, types.StringLiteral, types.boolean,
       types.VarArg(types.Any), target="cuda")
@lower(markers.stub(markers.GEMM), TileType, TileType, TileType, types.StringLiteral,
       target="amdgpu")
@lower(markers.stub(markers.GEMM), TileType, TileType, TileType, types.StringLiteral, types.boolean,
       types.VarArg(types.Any), target="amdgpu")
def gemm_impl(context, builder, sig, args):
    """A gemm; with more operands (the pipeline pass's folded refill: a condition, then
    source/destination pairs), the refill's cp.async are issued under the condition
    after the first k-step's ldmatrix, before its mma. On AMDGPU the plan is MFMA's
    (``mfma.py``). A sparse gemm (the metadata tile fifth): ``sparse_gemm.py``."""
    a_ty, b_ty, c_ty, gid = sig.args[:4]
    gp, *_ = plan().gemms[gid.literal_value]
    if gp.engine == "wgmma":
        return emit_wgmma_gemm(context, builder, sig, args)
    if gp.engine == "mfma":
        return emit_mfma_gemm(context, builder, sig, args)
    if gp.engine == "fma":
        return emit_fma_gemm(context, builder, sig, args)
    c_tile = plan().tile(c_ty.tile_name)
    if gp.clear_accum:
        zero = ir.Constant(context.get_data_type(c_ty.element), 0)
        for s in range(c_tile.indexing.slots):
            builder.store(zero, builder.gep(args[2], [I32(s)]))
    acc = _Accumulator(context, builder, gp, c_ty, args[2])
    operands = _operand_loader(context, builder, gp, a_ty, args[0], b_ty, args[1])
    # the operands of step kk + 1 are loaded before the mma of step kk, so their shared-
    # memory latency hides behind tensor-core work
    steps = gp.K // gp.k_step
    current = operands(0)
    if len(args) > 4:
        with builder.if_then(args[4]):
            for k in range(5, len(args), 2):
                emit_copy_async(context, builder, sig.args[k:k + 2], args[k:k + 2])
    for kk in range(steps):
        following = operands(kk + 1) if kk + 1 < steps else None
        _step_mmas(acc, gp, current)
        current = following
    return context.get_dummy_value()

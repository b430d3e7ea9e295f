"""``T.gemm`` on AMD's MFMA (gfx90a, gfx942; the plan's ``engine == "mfma"``,
``ir/gemm_plan.plan_mfma``), called from ``gemm.gemm_impl``.

The block's waves (64 lanes) form the plan's ``warps_m x warps_n`` grid, wave
``w = wm + warps_m * wn``; each owns ``repeat_m x repeat_n`` instruction tiles of
``M_i x N_i`` (32 x 32 or 16 x 16) and issues, per k step of ``K_i``, one
``llvm.amdgcn.mfma.*`` per tile. The instruction is issued with its operands swapped
(``D^T = B^T A^T``: the gemm's B as the instruction's A, the gemm's A as its B), so the
accumulator is ``mfma_fragment(instr, "CT")`` (``layouts/fragment.py``): lane ``l`` holds
part of row ``l % M_i`` of its tile, four consecutive columns per register quad, which is
both what a store to a row-major C wants and exactly the A operand the next gemm needs
(FlashAttention's P, held in registers).

Operand registers (the AMD Matrix Instruction Calculator's A/B formulas, both operands
alike): lane ``l`` needs, of its tile's row or column ``mn = l % M_i``, the ``KL = K_i / G``
elements ``k = KL * g + e`` of the k step, ``g = l // M_i`` (``G = 64 / M_i`` lane
groups). Which k of the gemm fills an instruction's k slot is free as long as A and B
agree: with both operands in shared memory the lowering packs ``P`` consecutive k steps
so that each lane group reads one contiguous run of ``W = P * KL`` elements (k =
``c * G * W + g * W + (kk % P) * KL + e`` for step ``kk`` of chunk ``c = kk // P``), up to
16 bytes, one ``ds_read_b128`` where the tile's layout keeps the run contiguous (a
K-major operand: A as (M, K), B as (N, K)); an MN-major operand is read element by
element. An A operand in registers keeps the plain order (``P = 1``): its slots are the
previous accumulator's. Each register's slot is checked against the tile's layout at
every lane of every wave at compile time, as for mma.sync.

The accumulators stay LLVM vectors (``<16 x float>``, ``<4 x i32>``, ...) across the k
steps and are written back to the fragment's slots at the end; the MFMAs of a step run
in a snake order over the wave's tiles.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir

from tilejit.errors import CompileError
from tilejit.ir.addressing import Var, fragment_tables, layout_offset
from tilejit.layouts import WAVE_SIZE, mfma_fragment
from tilejit.codegen.lowering.copy import emit_copy_async
from tilejit.codegen.lowering.copy_sides import chunks_contiguous
from tilejit.codegen.lowering.tiles import emit, intrinsic, plan, thread_index, uniform_slot

I32 = ir.IntType(32)
RUN_BYTES = 16          # the widest LDS read (ds_read_b128)


class _Instr:
    """The instruction's geometry: ``M_i x N_i x K_i``, ``G`` lane groups, ``KL`` elements
    of each operand per lane."""

    def __init__(self, gp):
        self.m, self.n, self.k = (int(x) for x in gp.instr.split("x"))
        self.groups = WAVE_SIZE // self.m
        self.per_lane = self.k // self.groups
        self.acc_regs = self.m * self.n // WAVE_SIZE


@lru_cache(maxsize=None)
def _check_formulas(shape: str) -> None:
    """The lane formulas this lowering emits (mn = l % M_i, k = KL * (l // M_i) + e) are
    the fragments' (property-tested against AMD's calculator in tests/layouts)."""
    m, _, k = (int(x) for x in shape.split("x"))
    per_lane = k // (WAVE_SIZE // m)
    for operand in ("A", "B"):
        inv = mfma_fragment(shape, operand).inverse()
        for lane in range(WAVE_SIZE):
            for e in range(per_lane):
                mn, kk = inv(lane, e) if operand == "A" else inv(lane, e)[::-1]
                if (mn, kk) != (lane % m, per_lane * (lane // m) + e):
                    raise CompileError(f"T.gemm (MFMA): the {operand} fragment of {shape} "
                                       f"disagrees with the lowering at lane {lane}")


@lru_cache(maxsize=None)
def _register_slots(frag, gp, operand):
    """slot[(tile, tile or k step, register)] of a block fragment holding every wave's
    accumulators (``operand == "C"``; register r of the swapped accumulator) or A operands
    (``"A"``; element e of the instruction's B operand, which the gemm's A fills), the
    same at every thread (checked for all lanes of all waves at once)."""
    instr = _Instr(gp)
    inst = mfma_fragment(gp.instr, "CT" if operand == "C" else "B")
    inv = inst.inverse()
    tables = fragment_tables(frag)
    waves = gp.threads // WAVE_SIZE
    wave = np.repeat(np.arange(waves), WAVE_SIZE)
    lane = np.tile(np.arange(WAVE_SIZE), waves)
    thread = lane + WAVE_SIZE * wave
    row0 = (wave % gp.warps_m) * gp.warp_m
    if operand == "C":
        col0 = (wave // gp.warps_m) * gp.warp_n
        tiles = [(rm, rn) for rm in range(gp.repeat_m) for rn in range(gp.repeat_n)]
        step = instr.n
    else:                       # A in registers: the plain k order (k step kk's columns)
        col0 = 0
        tiles = [(rm, kk) for rm in range(gp.repeat_m) for kk in range(gp.K // gp.k_step)]
        step = instr.k
    slots = {}
    for e in range(inst.slots_per_thread):
        rc = np.array([inv(x, e) for x in range(WAVE_SIZE)])[lane]
        if operand == "A":      # the instruction's B[k][j] is the gemm's A[j][k]
            rc = rc[:, ::-1]
        for ti, tj in tiles:
            row, col = row0 + ti * instr.m + rc[:, 0], col0 + tj * step + rc[:, 1]
            slots[(ti, tj, e)] = uniform_slot(frag, tables, thread, row, col,
                                              f"the {operand} fragment", "MFMA")
    return slots


def _pack_steps(gp, instr, a_in_registers: bool, size: int) -> int:
    """P: how many consecutive k steps one lane's contiguous run of k covers (``size``:
    the operands' bytes per element). 1 for an A in registers and for a float16
    accumulator (rounded after each 16 consecutive k: each step must cover a range)."""
    if a_in_registers or gp.dtypes[2] == "float16":
        return 1
    steps, p = gp.K // gp.k_step, 1
    while steps % (2 * p) == 0 and 2 * p * instr.per_lane * size <= RUN_BYTES:
        p *= 2
    return p


class _Operand:
    """One shared-memory operand of the gemm: this lane's elements, chunk by chunk
    (``W`` k values of its row or column of one instruction tile), loaded when first
    needed."""

    def __init__(self, context, builder, gp, instr, ty, ptr, which, origin, lane_mn, group,
                 pack):
        self.context, self.builder, self.gp, self.instr = context, builder, gp, instr
        self.ty, self.ptr, self.which = ty, ptr, which
        self.tile = plan().tile(ty.tile_name)
        self.origin, self.lane_mn, self.group = origin, lane_mn, group
        self.pack, self.width = pack, pack * instr.per_lane
        transposed = gp.transpose_A if which == "A" else not gp.transpose_B
        self.k_major = not transposed        # (mn, k) with k the tile's last dimension
        self.elem = context.get_data_type(ty.element)
        self.run = 1
        if self.k_major:
            size = self.tile.dtype.itemsize
            run = self.width
            while run > 1 and (run * size > RUN_BYTES or self.width % run
                               or not chunks_contiguous(self.tile.layout, self.tile.shape,
                                                         run)):
                run //= 2
            self.run = run
        self.names = [Var("r"), Var("c")]
        self.offset = layout_offset(self.tile.layout, self.names)
        self.chunks = {}

    def _address(self, mn, k):
        b = self.builder
        rc = (mn, k) if self.k_major else (k, mn)
        off = emit(b, self.offset, {"r": rc[0], "c": rc[1]})
        return b.gep(self.ptr, [off], inbounds=True)

    def _load_chunk(self, t, c):
        b = self.builder
        instr = self.instr
        mn = b.add(self.origin, I32(t * (instr.m if self.which == "A" else instr.n)))
        mn = b.add(mn, self.lane_mn)
        k0 = b.add(I32(c * instr.groups * self.width), b.mul(self.group, I32(self.width)))
        values = []
        for j in range(0, self.width, self.run):
            k = b.add(k0, I32(j)) if j else k0
            p = self._address(mn, k)
            if self.run == 1:
                v = self.context.unpack_value(b, self.ty.element, p)
                values.append(self.context.data_model_manager[self.ty.element].as_data(b, v))
                continue
            vt = ir.VectorType(self.elem, self.run)
            raw = b.load(b.bitcast(p, ir.PointerType(vt, p.type.addrspace)),
                         align=self.run * self.tile.dtype.itemsize)
            values += [b.extract_element(raw, I32(x)) for x in range(self.run)]
        return values

    def elements(self, t, kk):
        """The KL elements (as data) of tile t at k step kk."""
        c, s = divmod(kk, self.pack)
        if (t, c) not in self.chunks:
            self.chunks[(t, c)] = self._load_chunk(t, c)
        kl = self.instr.per_lane
        return self.chunks[(t, c)][s * kl:(s + 1) * kl]


class _RegisterA:
    """An A operand held in registers (the previous gemm's swapped accumulator): slot by
    slot, each slot checked at every lane (``_register_slots``)."""

    def __init__(self, context, builder, gp, ty, ptr):
        self.context, self.builder, self.ty, self.ptr = context, builder, ty, ptr
        self.slots = _register_slots(plan().tile(ty.tile_name).layout, gp, "A")
        self.per_lane = _Instr(gp).per_lane

    def elements(self, t, kk):
        b, out = self.builder, []
        for e in range(self.per_lane):
            p = b.gep(self.ptr, [I32(self.slots[(t, kk, e)])])
            v = self.context.unpack_value(b, self.ty.element, p)
            out.append(self.context.data_model_manager[self.ty.element].as_data(b, v))
        return out


def _tf32(builder, x):
    """float32 rounded to TensorFloat-32 as the simulator does (to nearest, ties away:
    ``(bits + 0x1000) & 0xFFFFE000``), infinities and NaN kept."""
    bits = builder.bitcast(x, I32)
    rounded = builder.and_(builder.add(bits, I32(0x1000)), I32(0xFFFFE000 - (1 << 32)))
    fabs = intrinsic(builder, "llvm.fabs.f32", x.type, [x.type])
    finite = builder.fcmp_ordered("<", builder.call(fabs, [x]), ir.Constant(x.type, float("inf")))
    return builder.bitcast(builder.select(finite, rounded, bits), x.type)


def _register(builder, gp, values):
    """The KL element values as the intrinsic's operand type."""
    if gp.dtypes[0] == "float32":       # one element a lane, TF32-rounded
        return _tf32(builder, values[0])
    elem = values[0].type
    vec = ir.Constant(ir.VectorType(elem, len(values)), None)
    for x, v in enumerate(values):
        vec = builder.insert_element(vec, v, I32(x))
    if gp.dtypes[0] == "int8":          # 4 bytes as i32 (gfx90a), 8 as i64 (gfx942)
        return builder.bitcast(vec, ir.IntType(8 * len(values)))
    return vec


def _intrinsic(builder, gp, operand_type, acc_type):
    return intrinsic(builder, f"llvm.amdgcn.mfma.{gp.kind}", acc_type,
                     [operand_type, operand_type, acc_type, I32, I32, I32])


def emit_mfma_gemm(context, builder, sig, args):
    a_ty, b_ty, c_ty = sig.args[:3]
    gp, *_ = plan().gemms[sig.args[3].literal_value]
    instr = _Instr(gp)
    _check_formulas(gp.instr)
    c_tile = plan().tile(c_ty.tile_name)
    acc_slots = _register_slots(c_tile.layout, gp, "C")
    tid = thread_index(context, builder)
    lane = builder.and_(tid, I32(WAVE_SIZE - 1))
    # the wave index is the same in every lane: a scalar register
    first = intrinsic(builder, "llvm.amdgcn.readfirstlane.i32", I32, [I32])
    wave = builder.call(first, [builder.lshr(tid, I32(6))])
    wm = builder.urem(wave, I32(gp.warps_m)) if gp.warps_m > 1 else I32(0)
    wn = builder.udiv(wave, I32(gp.warps_m)) if gp.warps_n > 1 else I32(0)
    row0, col0 = builder.mul(wm, I32(gp.warp_m)), builder.mul(wn, I32(gp.warp_n))
    lane_mn = builder.and_(lane, I32(instr.m - 1))
    group = builder.lshr(lane, I32(instr.m.bit_length() - 1))
    a_regs = a_ty.kind == "fragment"
    pack = _pack_steps(gp, instr, a_regs, plan().tile(b_ty.tile_name).dtype.itemsize)
    if a_regs:
        a_op = _RegisterA(context, builder, gp, a_ty, args[0])
    else:
        a_op = _Operand(context, builder, gp, instr, a_ty, args[0], "A", row0, lane_mn, group,
                        pack)
    b_op = _Operand(context, builder, gp, instr, b_ty, args[1], "B", col0, lane_mn, group,
                    pack)
    if len(args) > 4:                   # a folded refill (cp.async targets only)
        with builder.if_then(args[4]):
            for k in range(5, len(args), 2):
                emit_copy_async(context, builder, sig.args[k:k + 2], args[k:k + 2])
    half = gp.dtypes[2] == "float16"    # f32 registers, rounded to f16 every 16 of K
    acc_elem = ir.FloatType() if half else context.get_data_type(c_ty.element)
    acc_type = ir.VectorType(acc_elem, instr.acc_regs)
    acc = {}
    for rm in range(gp.repeat_m):
        for rn in range(gp.repeat_n):
            if gp.clear_accum:
                acc[(rm, rn)] = ir.Constant(acc_type, [ir.Constant(acc_elem, 0)]
                                            * instr.acc_regs)
                continue
            v = ir.Constant(acc_type, None)
            for r in range(instr.acc_regs):
                slot = builder.load(builder.gep(args[2], [I32(acc_slots[(rm, rn, r)])]))
                v = builder.insert_element(v, builder.fpext(slot, acc_elem) if half else slot,
                                           I32(r))
            acc[(rm, rn)] = v
    half_type = ir.VectorType(ir.HalfType(), instr.acc_regs)
    fn = None
    for kk in range(gp.K // gp.k_step):
        a_vals = [_register(builder, gp, a_op.elements(rm, kk)) for rm in range(gp.repeat_m)]
        b_vals = [_register(builder, gp, b_op.elements(rn, kk)) for rn in range(gp.repeat_n)]
        if fn is None:
            fn = _intrinsic(builder, gp, a_vals[0].type, acc_type)
        for rm in range(gp.repeat_m):
            cols = range(gp.repeat_n) if rm % 2 == 0 else reversed(range(gp.repeat_n))
            for rn in cols:             # D^T = B^T A^T: the gemm's B is the instruction's A
                acc[(rm, rn)] = builder.call(fn, [b_vals[rn], a_vals[rm], acc[(rm, rn)],
                                                  I32(0), I32(0), I32(0)])
        if half and (kk + 1) * gp.k_step % 16 == 0:
            for key, v in acc.items():
                acc[key] = builder.fptrunc(v, half_type)
                if kk + 1 < gp.K // gp.k_step:
                    acc[key] = builder.fpext(acc[key], acc_type)
    for (rm, rn), v in acc.items():
        for r in range(instr.acc_regs):
            builder.store(builder.extract_element(v, I32(r)),
                          builder.gep(args[2], [I32(acc_slots[(rm, rn, r)])]))
    return context.get_dummy_value()

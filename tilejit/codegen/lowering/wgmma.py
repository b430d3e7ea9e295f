"""``T.gemm`` on Hopper's ``wgmma.mma_async`` (sm_90a; the plan's ``engine == "wgmma"``).

A warpgroup (4 consecutive warps, 128 threads) issues one instruction for a 64 x N
slice of C (N up to 256) and one k step; warpgroup ``g = gm + groups_m * gn`` owns the
``slices`` m64 slices of rows ``64 * slices * gm ...`` and the columns
``N * gn ...`` (``ir/gemm_plan.wgmma_fragment``: the accumulator registers of slice
``rm`` are the fragment's slots ``4 * (rn + n_blocks * rm) + e``).

Both shared operands are read through 64-bit matrix descriptors (PTX ISA, "Matrix
Descriptor Format"): the start address, the leading and stride byte offsets (>> 4) and
the swizzle mode. The layout pass only planned wgmma for tiles in the canonical
swizzled layouts (``ir/smem_layouts.py``), given as ``(swizzle, width, rows, cols)``:
atoms of ``width`` columns, each ``rows`` rows of ``swizzle`` bytes. A K-major operand
(A as (M, K), B as (N, K)) steps 8-row groups by ``SBO = 8 * swizzle`` and moves along K
inside an atom by adding bytes to the start address; an MN-major one (A^T as (K, M), B as
(K, N), 16-bit types only: the instruction's transpose bit) steps atoms along M/N by
``LBO = rows * swizzle`` and 8-row groups of K by ``SBO``. The start address only ever
grows by multiples of 16 inside a 1024-byte aligned pattern, so the base offset is 0.

One gemm is: the accumulator registers passed through an empty asm (so LLVM keeps
their earlier writes above the fence; a gemm that clears C passes none: its first step,
``scale-d = 0``, does not read them and they are its outputs only), ``wgmma.fence``, the
``k steps x slices`` instructions, ``commit_group``,
``wait_group 0``, the registers passed through again (so nothing reads them above the
wait). A gemm therefore returns with its reads of shared memory complete, which is what
the pipelines' stage release relies on.
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.ir.gemm_plan import ITEMSIZE, WGMMA, WGMMA_SPARSE
from tilejit.codegen.lowering.copy import emit_copy_async
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.sparse_meta import SparseMetadata
from tilejit.codegen.lowering.tiles import inline_asm, plan, thread_index

I32, I64, F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
HALF2 = ir.VectorType(ir.HalfType(), 2)
_MODE = {128: 1, 64: 2, 32: 3}          # the descriptor's swizzle field
WARPGROUP = 128




def _barrier_asm(builder, text):
    inline_asm(builder, text, "~{memory}", [])


def descriptor(builder, pointer, smem, mn_major: bool) -> ir.Value:
    """The i64 descriptor of the tile at ``pointer`` (its first atom)."""
    swizzle, _width, rows, _cols = smem
    address = builder.ptrtoint(pointer, I32)
    start = builder.zext(builder.and_(builder.lshr(address, I32(4)), I32(0x3FFF)), I64)
    lbo = (rows * swizzle) >> 4 if mn_major else 1
    sbo = (8 * swizzle) >> 4
    return builder.or_(start, I64((lbo << 16) | (sbo << 32) | (_MODE[swizzle] << 62)))


def operand_offset(smem, mn0: int, k0: int, itemsize: int, mn_major: bool) -> int:
    """Byte offset of element (mn0, k0) of an operand whose swizzle atoms start there."""
    swizzle, width, rows, _cols = smem
    if mn_major:                    # tile rows are k, columns m or n
        return (mn0 // width) * rows * swizzle + k0 * swizzle
    return (k0 // width) * rows * swizzle + mn0 * swizzle + (k0 % width) * itemsize


def _advance(builder, desc, nbytes):
    if isinstance(nbytes, int):
        return builder.add(desc, I64(nbytes >> 4)) if nbytes else desc
    return builder.add(desc, builder.zext(builder.lshr(nbytes, I32(4)), I64))


def _pass_through(builder, values, constraint):
    """Each value through an empty asm: LLVM cannot move its uses across this point."""
    out = []
    for v in values:
        fn = ir.InlineAsm(ir.FunctionType(v.type, [v.type]), "", f"={constraint},0",
                          side_effect=True)
        out.append(builder.call(fn, [v]))
    return out


class _Accumulator:
    """The C registers of this thread's slices, as wgmma's operands: f32/s32 one value
    per register, f16 two per register (slots e0e1, e2e3 of each n block)."""

    def __init__(self, context, builder, gp, c_ty, c_ptr):
        self.builder, self.gp, self.ptr = builder, gp, c_ptr
        self.half = gp.dtypes[2] == "float16"
        self.constraint = "r" if self.half or gp.dtypes[2] == "int32" else "f"
        self.per_slice = 4 * gp.repeat_n
        self.registers = self.per_slice // 2 if self.half else self.per_slice

    def load(self, rm):
        b = self.builder
        base = self.per_slice * rm
        vals = [b.load(b.gep(self.ptr, [I32(base + s)])) for s in range(self.per_slice)]
        if not self.half:
            return vals
        regs = []
        for k in range(0, self.per_slice, 2):
            v = ir.Constant(HALF2, None)
            v = b.insert_element(v, vals[k], I32(0))
            v = b.insert_element(v, vals[k + 1], I32(1))
            regs.append(b.bitcast(v, I32))
        return regs

    def store(self, rm, regs):
        b = self.builder
        base = self.per_slice * rm
        if self.half:
            vals = []
            for r in regs:
                v = b.bitcast(r, HALF2)
                vals += [b.extract_element(v, I32(0)), b.extract_element(v, I32(1))]
        else:
            vals = regs
        for s, v in enumerate(vals):
            b.store(v, b.gep(self.ptr, [I32(base + s)]))


def _a_registers(context, builder, gp, a_ty, a_ptr, rm, kk):
    """The four A registers of slice rm, k step kk, from an A fragment in the wgmma
    accumulator layout over K (``GemmPlan.a_fragment``): C blocks 2kk and 2kk + 1."""
    blocks = gp.K // 8
    regs = []
    for kb in (2 * kk, 2 * kk + 1):
        base = 4 * (kb + blocks * rm)
        for e in (0, 2):
            pair = []
            for s in (base + e, base + e + 1):
                v = context.unpack_value(builder, a_ty.element, builder.gep(a_ptr, [I32(s)]))
                data = context.data_model_manager[a_ty.element].as_data(builder, v)
                pair.append(builder.zext(builder.bitcast(data, ir.IntType(16)), I32))
            regs.append(builder.or_(pair[0], builder.shl(pair[1], I32(16))))
    # registers a0..a3: (g, k 0-7), (g + 8, k 0-7), (g, k 8-15), (g + 8, k 8-15)
    return regs


def _instruction(builder, gp, acc, regs, a, b_desc, accumulate, meta=None):
    """One wgmma.mma_async of a slice: new accumulator registers. With ``accumulate``
    false (``scale-d = 0``) ``regs`` is None: the registers are outputs only, so no
    instruction defines them before the asynchronous write (LLVM would materialize
    undefined inputs as zeros). ``meta``: a sparse gemm's metadata register
    (``wgmma.mma_async.sp``, sparsity selector 0: ``sparse_meta.py``)."""
    types, k = (WGMMA_SPARSE if gp.sparse else WGMMA)[gp.dtypes]
    n = gp.warp_n
    count = acc.registers
    outs = ", ".join(f"${i}" for i in range(count))
    if isinstance(a, list):             # A from registers
        a_text = "{" + ", ".join(f"${count + i}" for i in range(4)) + "}"
        a_cons, nxt = ["r"] * 4, count + 4
        tail = f", 1, 1, {0 if gp.transpose_B else 1}"
        a_args = a
    else:
        a_text, a_cons, nxt = f"${count}", ["l"], count + 1
        tail = f", 1, 1, {1 if gp.transpose_A else 0}, {0 if gp.transpose_B else 1}"
        a_args = [a]
    if types.startswith("s32"):         # integer: no scale or transpose immediates
        tail = ""
    elif "e4m3" in types or "e5m2" in types:    # float8: scales, no transpose immediates
        tail = ", 1, 1"
    sp, sp_text, sp_cons, sp_args = "", "", [], []
    if meta is not None:                # metadata register, then selector 0
        sp, sp_text, sp_cons, sp_args = ".sp", f"${nxt + 1}, 0, ", ["r"], [meta]
    scale = nxt + 1 + len(sp_args)
    text = ("{ .reg .pred tjd; setp.ne.b32 tjd, $" + str(scale) + ", 0; "
            f"wgmma.mma_async{sp}.sync.aligned.m64n{n}k{k}.{types} {{{outs}}}, {a_text}, "
            f"${nxt}, {sp_text}tjd{tail}; }}")
    tied = [str(i) for i in range(count)] if regs is not None else []
    constraints = ",".join([f"={acc.constraint}"] * count + a_cons + ["l"] + sp_cons + ["r"]
                           + tied)
    ret = _accumulator_struct(builder, F32 if acc.constraint == "f" else I32, count)
    out = inline_asm(builder, text, constraints,
                     a_args + [b_desc] + sp_args + [I32(int(accumulate))] + (regs or []), ret)
    return [builder.extract_value(out, i) for i in range(count)]


def _accumulator_struct(builder, element, count):
    """The wgmma's result, ``count`` registers, as a named struct type
    (``%"tj.wgmma.f32x64"``): each of its ``count`` extractvalues then names the type in
    a few characters instead of spelling ``{float, float, ...}`` out (over a third of
    FlashAttention's lowered IR text, which is built, printed and parsed again). Types
    do not reach the PTX."""
    name = f"tj.wgmma.{'f32' if element == F32 else 'i32'}x{count}"
    struct = builder.module.context.get_identified_type(name)
    if struct.is_opaque:
        struct.set_body(*([element] * count))
    return struct


def emit_wgmma_gemm(context, builder, sig, args):
    a_ty, b_ty, c_ty = sig.args[:3]
    gp, *_ = plan().gemms[sig.args[3].literal_value]
    acc = _Accumulator(context, builder, gp, c_ty, args[2])
    size = ITEMSIZE[gp.dtypes[0]]
    groups_m, groups_n = gp.warpgroups_m, gp.warpgroups_n
    group = builder.lshr(thread_index(context, builder), I32(7))
    gm = builder.urem(group, I32(groups_m)) if groups_m > 1 else None
    gn = builder.udiv(group, I32(groups_m)) if groups_n > 1 else None
    a_mn, b_mn = gp.transpose_A, not gp.transpose_B
    in_registers = gp.a_smem is None
    if not in_registers:
        a_desc = descriptor(builder, args[0], gp.a_smem, a_mn)
        if gm is not None:
            step = operand_offset(gp.a_smem, 64 * gp.repeat_m, 0, size, a_mn)
            a_desc = _advance(builder, a_desc, builder.mul(gm, I32(step)))
    b_desc = descriptor(builder, args[1], gp.b_smem, b_mn)
    if gn is not None:
        step = operand_offset(gp.b_smem, gp.warp_n, 0, size, b_mn)
        b_desc = _advance(builder, b_desc, builder.mul(gn, I32(step)))
    if gp.clear_accum:      # scale-d = 0 on the first step: the old values are not read
        regs = [None] * gp.repeat_m
    else:
        regs = [_pass_through(builder, acc.load(rm), acc.constraint)
                for rm in range(gp.repeat_m)]
    meta = None
    if gp.sparse:       # the metadata tile E, the fifth operand (never a folded refill)
        lane = builder.and_(thread_index(context, builder), I32(31))
        meta = SparseMetadata(context, builder, sig.args[4], args[4], lane, gp.transpose_E)
        warp = builder.and_(builder.lshr(thread_index(context, builder), I32(5)), I32(3))
        row0 = builder.mul(warp, I32(16))
        if gm is not None:
            row0 = builder.add(row0, builder.mul(gm, I32(64 * gp.repeat_m)))
    _barrier_asm(builder, "wgmma.fence.sync.aligned;")
    if len(args) > 4 and not gp.sparse:     # the pipeline's folded cp.async refill
        with builder.if_then(args[4]):
            for k in range(5, len(args), 2):
                emit_copy_async(context, builder, sig.args[k:k + 2], args[k:k + 2])
    steps = gp.K // gp.k_step
    # a region operand: its origin (ir/gemm_plan._atom_aligned) as (mn, k) in the tile
    a_mn0, a_k0 = gp.a_origin[::-1] if a_mn else gp.a_origin
    b_mn0, b_k0 = gp.b_origin[::-1] if b_mn else gp.b_origin
    a_k_step = gp.k_step // 2 if gp.sparse else gp.k_step   # the compressed A: half of K
    for kk in range(steps):
        b_k = _advance(builder, b_desc, operand_offset(gp.b_smem, b_mn0, b_k0 + kk * gp.k_step,
                                                       size, b_mn))
        for rm in range(gp.repeat_m):
            if in_registers:
                a = _a_registers(context, builder, gp, a_ty, args[0], rm, kk)
            else:
                a = _advance(builder, a_desc, operand_offset(gp.a_smem, a_mn0 + 64 * rm,
                                                             a_k0 + kk * a_k_step, size, a_mn))
            e = meta.register(builder.add(row0, I32(64 * rm)), kk) if meta else None
            regs[rm] = _instruction(builder, gp, acc, regs[rm], a, b_k,
                                    accumulate=not (gp.clear_accum and kk == 0), meta=e)
    _barrier_asm(builder, "wgmma.commit_group.sync.aligned;")
    gid = sig.args[3].literal_value
    if gid in plan().deferred_waits:    # its __tj_wgmma_wait hands the registers back
        if gid in plan().wgmma_pending:
            raise AssertionError(f"internal error: deferred wgmma gemm {gid} lowered twice "
                                 f"before its wait")
        plan().wgmma_pending[gid] = (acc, regs)
        return context.get_dummy_value()
    _barrier_asm(builder, "wgmma.wait_group.sync.aligned 0;")
    for rm in range(gp.repeat_m):
        acc.store(rm, _pass_through(builder, regs[rm], acc.constraint))
    return context.get_dummy_value()


@lower(markers.stub(markers.WGMMA_WAIT), types.VarArg(types.Any), target="cuda")
def wgmma_wait_impl(context, builder, sig, args):
    """The deferred gemms' wait (passes/wgmma_waits.py): ``wait_group 0``, then each
    one's accumulator registers through an empty asm (nothing reads them above the wait)
    into its fragment."""
    _barrier_asm(builder, "wgmma.wait_group.sync.aligned 0;")
    for ty in sig.args:
        acc, regs = plan().wgmma_pending.pop(ty.literal_value)
        for rm, values in enumerate(regs):
            acc.store(rm, _pass_through(builder, values, acc.constraint))
    return context.get_dummy_value()

"""``T.gemm_sp`` on the sparse tensor cores: ``__tj_gemm(A, B, C, gid, E)`` with a sparse
plan (``passes/sparse_gemms.py`` kept it; A the compressed (M, K / 2) shared tile, E the
metadata tile).

On wgmma (sm_90a) ``wgmma.py`` issues ``wgmma.mma_async.sp``. On mma.sync (sm_80+) each
warp issues ``mma.sp.sync.aligned.m16n8k32`` per k32 step (PTX ISA 7.1): its A registers
are those of a dense m16n8k16 A tile of the compressed tile at columns ``16 kk ...`` (the
sparse A fragment is the dense one over the compressed matrix), its B registers those of
the dense k16 steps ``2 kk`` and ``2 kk + 1`` (rows ``2 t + 8 i`` of the 32 x 8 B), so
``gemm.py``'s loads serve both, ldmatrix where the layout keeps 16-byte rows; the
metadata register is ``sparse_meta.py``'s (the same per-warp mapping as wgmma's), with
sparsity selector 0. The plain ``.sp`` form: ``.sp::ordered_metadata`` needs PTX 8.5,
and the metadata this takes has its positions in increasing order anyway (the
simulator refuses any other)."""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.lowering.gemm import HALF2, _Accumulator, _Warp, operand_loaders
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.sparse_meta import SparseMetadata
from tilejit.codegen.lowering.tiles import plan
from tilejit.codegen.lowering.wgmma import emit_wgmma_gemm

I32, F32 = ir.IntType(32), ir.FloatType()
# (A, C) dtypes -> the instruction's type suffix
_TYPES = {("float16", "float32"): "f32.f16.f16.f32", ("float16", "float16"): "f16.f16.f16.f16",
          ("bfloat16", "float32"): "f32.bf16.bf16.f32"}


def _mma_sp(builder, gp, a, b, c, e):
    """One ``mma.sp.sync.aligned.m16n8k32`` (inline asm: LLVM has no intrinsic): four A,
    four B registers, the metadata register, selector 0; ``c`` as ``_Accumulator.apply``
    passes it (f32 values, or half2 vectors, in registers as b32)."""
    half = gp.dtypes[2] == "float16"
    suffix = _TYPES[(gp.dtypes[0], gp.dtypes[2])]
    nc = len(c)
    ops = [f"${i}" for i in range(2 * nc + 9)]
    d, a_, b_, c_, e_ = (ops[:nc], ops[nc:nc + 4], ops[nc + 4:nc + 8],
                         ops[nc + 8:2 * nc + 8], ops[-1])
    text = (f"mma.sp.sync.aligned.m16n8k32.row.col.{suffix} {{{', '.join(d)}}}, "
            f"{{{', '.join(a_)}}}, {{{', '.join(b_)}}}, {{{', '.join(c_)}}}, {e_}, 0x0;")
    cons, cty = ("r", I32) if half else ("f", F32)
    fnty = ir.FunctionType(ir.LiteralStructType([cty] * nc), [I32] * 8 + [cty] * nc + [I32])
    asm = ir.InlineAsm(fnty, text, ",".join([f"={cons}"] * nc + ["r"] * 8 + [cons] * nc
                                            + ["r"]))
    if half:
        c = [builder.bitcast(v, I32) for v in c]
    out = builder.call(asm, a + b + c + [e])
    d = [builder.extract_value(out, k) for k in range(nc)]
    return [builder.bitcast(v, HALF2) for v in d] if half else d


@lower(markers.stub(markers.GEMM), TileType, TileType, TileType, types.StringLiteral, TileType,
       target="cuda")
def sparse_gemm_impl(context, builder, sig, args):
    a_ty, b_ty, c_ty, gid, e_ty = sig.args
    gp, *_ = plan().gemms[gid.literal_value]
    if gp.engine == "wgmma":
        return emit_wgmma_gemm(context, builder, sig, args)
    if gp.engine != "mma":
        raise AssertionError(f"internal error: sparse gemm {gid.literal_value} on {gp.engine}")
    if gp.clear_accum:
        zero = ir.Constant(context.get_data_type(c_ty.element), 0)
        for s in range(plan().tile(c_ty.tile_name).indexing.slots):
            builder.store(zero, builder.gep(args[2], [I32(s)]))
    acc = _Accumulator(context, builder, gp, c_ty, args[2])
    w = _Warp(context, builder, gp)
    meta = SparseMetadata(context, builder, e_ty, args[4], w.lane, gp.transpose_E)
    # A's k16 steps over the compressed tile are the sparse k32 steps; B's are dense
    load_a, load_b = operand_loaders(context, builder, gp, a_ty, args[0], b_ty, args[1],
                                     a_steps=gp.K // 32)
    for kk in range(gp.K // 32):
        a_regs = load_a(kk)
        b_lo, b_hi = load_b(2 * kk), load_b(2 * kk + 1)
        for rm in range(gp.repeat_m):
            e = meta.register(builder.add(w.row0, I32(16 * rm)), kk)
            cols = range(gp.repeat_n) if rm % 2 == 0 else reversed(range(gp.repeat_n))
            for rn in cols:
                acc.apply(rm, rn, lambda c, a=a_regs[rm], b=b_lo[rn] + b_hi[rn], e=e:
                          _mma_sp(builder, gp, a, b, c, e))
    return context.get_dummy_value()

"""``T.gemm`` without a tensor-core instruction (the plan's ``engine == "fma"``:
``ir/gemm_plan.FMA``, float64): TileLang's SIMT gemm. Each thread computes the elements
of C it holds (its slots of the accumulator layout, ``GemmPlan.c_fragment``) as a loop
over K of fused multiply-adds, reading A and B from shared memory in their layouts:

    for each slot (i, j) of C this thread holds:
        acc = 0 if clear_accum else C[slot]
        for k in range(K):
            acc = fma(A[i, k], B[k, j], acc)        # A[k, i] / B[j, k] when transposed
        C[slot] = acc

The sum over K is in order, rounded once per step (the simulator sums the same products
in float64; they agree to rounding). A pipeline's folded refill (``passes/pipeline.py``)
is issued first, under its condition. Nothing here is wave- or warp-wide, so the same
rule serves CUDA and AMDGPU.
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

from tilejit.codegen.lowering.copy import emit_copy_async
from tilejit.codegen.lowering.tiles import (I32, element_offset, guarded, intrinsic,
                                            owned_elements, plan)


def emit_fma_gemm(context, builder, sig, args):
    a_ty, b_ty, c_ty = sig.args[:3]
    gp, *_ = plan().gemms[sig.args[3].literal_value]
    if len(args) > 4:                   # the pipeline's folded cp.async refill
        with builder.if_then(args[4]):
            for k in range(5, len(args), 2):
                emit_copy_async(context, builder, sig.args[k:k + 2], args[k:k + 2])
    ety = context.get_data_type(c_ty.element)
    fma = intrinsic(builder, f"llvm.fma.{'f64' if isinstance(ety, ir.DoubleType) else 'f32'}",
                    ety, [ety, ety, ety])

    def operand(ty, ptr, row, col, origin):
        r0, c0 = origin                 # a region operand's first element in its tile
        row = builder.add(row, I32(r0)) if r0 else row
        col = builder.add(col, I32(c0)) if c0 else col
        p = builder.gep(ptr, [element_offset(builder, ty, [row, col])])
        v = context.unpack_value(builder, ty.element, p)
        return context.cast(builder, v, ty.element, c_ty.element)

    for (i, j), ptr, guard in owned_elements(context, builder, c_ty, args[2]):
        with guarded(builder, guard):
            start = ir.Constant(ety, 0.0) if gp.clear_accum else builder.load(ptr)
            acc = cgutils.alloca_once_value(builder, start)
            with cgutils.for_range(builder, I32(gp.K)) as loop:
                k = loop.index
                a = operand(a_ty, args[0], *((k, i) if gp.transpose_A else (i, k)),
                            gp.a_origin)
                b = operand(b_ty, args[1], *((j, k) if gp.transpose_B else (k, j)),
                            gp.b_origin)
                builder.store(builder.call(fma, [a, b, builder.load(acc)]), acc)
            builder.store(builder.load(acc), ptr)
    return context.get_dummy_value()

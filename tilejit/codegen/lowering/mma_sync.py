"""Lowering of ``TensorCoreIntrinEmitter``'s warp instructions, NVPTX (typing:
``codegen/typing/mma.py``; the simulator's meaning: ``sim/mma.py``).

- ``__tj_ldmatrix(local, offset, shared, row, col, count, trans)``: this lane's address is
  element (row, col) of the shared tile under its layout, which must keep every 16-byte
  row of 8 (16 for int8) elements contiguous and aligned; ``llvm.nvvm.ldmatrix.sync.aligned
  .m8n8.x<count>[.trans].b16`` returns ``count`` 32-bit registers, whose elements (the
  lowest-addressed in the low bits) are stored to ``local[offset + …]``.
- ``__tj_mma_sync(C, c_off, A, a_off, B, b_off)``: the elements of PTX's fragments read
  from the local arrays (``a0 … a7`` at ``A[a_off …]``), packed into registers, one
  ``llvm.nvvm.mma.m16n8k16.row.col`` (``m16n8k32 .s8`` for int8) and the four
  accumulators stored back. The local arrays' constant slots make SROA keep them in
  registers.
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.codegen.lowering.copy_sides import chunks_contiguous
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import element_offset, intrinsic, plan
from tilejit.codegen.typing.tiles import TileType

I32, F32, HALF2 = ir.IntType(32), ir.FloatType(), ir.VectorType(ir.HalfType(), 2)


def _element_type(context, ty: TileType):
    return context.get_data_type(ty.element)


def _registers(context, builder, ty, ptr, offset, count):
    """``count`` 32-bit registers of a local array's elements from ``offset``, packed."""
    elem = _element_type(context, ty)
    per = 4 // ty.dtype.itemsize
    vec = ir.VectorType(elem, per)
    regs = []
    for r in range(count):
        v = ir.Constant(vec, ir.Undefined)
        for e in range(per):
            p = builder.gep(ptr, [I32(offset + r * per + e)], inbounds=True)
            v = builder.insert_element(v, builder.load(p), I32(e))
        regs.append(v if vec == HALF2 else builder.bitcast(v, I32))
    return regs


def _store_registers(context, builder, ty, ptr, offset, regs):
    elem = _element_type(context, ty)
    per = 4 // ty.dtype.itemsize
    vec = ir.VectorType(elem, per)
    for r, reg in enumerate(regs):
        v = builder.bitcast(reg, vec) if reg.type != vec else reg
        for e in range(per):
            p = builder.gep(ptr, [I32(offset + r * per + e)], inbounds=True)
            builder.store(builder.extract_element(v, I32(e)), p)


@lower(markers.stub(markers.LDMATRIX), TileType, types.IntegerLiteral, TileType, types.int32,
       types.int32, types.IntegerLiteral, types.BooleanLiteral)
def ldmatrix_impl(context, builder, sig, args):
    local_ty, offset_ty, shared_ty, _, _, count_ty, trans_ty = sig.args
    local, _, shared, row, col, _, _ = args
    tile = plan().tile(shared_ty.tile_name)
    per_row = 16 // tile.dtype.itemsize
    if not chunks_contiguous(tile.layout, tile.shape, per_row):
        raise CompileError(f"TensorCoreIntrinEmitter: ldmatrix reads 16-byte rows of "
                           f"{shared_ty.tile_name}, and its layout does not keep {per_row} "
                           f"consecutive elements of a row contiguous and aligned (a "
                           f"{tile.shape[1]}-element row; use a multiple of {per_row})")
    count, trans = count_ty.literal_value, trans_ty.literal_value
    address = builder.gep(shared, [element_offset(builder, shared_ty, [row, col])],
                          inbounds=True)
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.b16.p3"
    fn = intrinsic(builder, name, ir.LiteralStructType([I32] * count),
                   [ir.PointerType(ir.IntType(8), 3)])
    out = builder.call(fn, [builder.bitcast(address, ir.PointerType(ir.IntType(8), 3))])
    regs = [builder.extract_value(out, k) for k in range(count)]
    _store_registers(context, builder, local_ty, local, offset_ty.literal_value, regs)
    return context.get_dummy_value()


# (A/B dtype, C dtype) -> (intrinsic, operand register type, accumulator register type)
_MMA = {
    ("float16", "float32"): ("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", HALF2, F32),
    ("float16", "float16"): ("llvm.nvvm.mma.m16n8k16.row.col.f16.f16", HALF2, HALF2),
    ("bfloat16", "float32"): ("llvm.nvvm.mma.m16n8k16.row.col.bf16", I32, F32),
    ("int8", "int32"): ("llvm.nvvm.mma.m16n8k32.row.col.s8", I32, I32),
}


@lower(markers.stub(markers.MMA_SYNC), TileType, types.IntegerLiteral, TileType,
       types.IntegerLiteral, TileType, types.IntegerLiteral)
def mma_sync_impl(context, builder, sig, args):
    c_ty, c_off, a_ty, a_off, b_ty, b_off = sig.args
    c, _, a, _, b, _ = args
    name, operand, accum = _MMA[(a_ty.dtype.name, c_ty.dtype.name)]
    a_regs = _registers(context, builder, a_ty, a, a_off.literal_value, 4)
    b_regs = _registers(context, builder, b_ty, b, b_off.literal_value, 2)
    if accum == HALF2:      # c0 c1 and c2 c3 as two f16x2 registers
        c_regs = _registers(context, builder, c_ty, c, c_off.literal_value, 2)
    else:
        c_regs = [builder.load(builder.gep(c, [I32(c_off.literal_value + k)], inbounds=True))
                  for k in range(4)]
    fn = intrinsic(builder, name, ir.LiteralStructType([accum] * len(c_regs)),
                   [operand] * 6 + [accum] * len(c_regs))
    out = builder.call(fn, a_regs + b_regs + c_regs)
    d = [builder.extract_value(out, k) for k in range(len(c_regs))]
    if accum == HALF2:
        _store_registers(context, builder, c_ty, c, c_off.literal_value, d)
    else:
        for k, v in enumerate(d):
            builder.store(v, builder.gep(c, [I32(c_off.literal_value + k)], inbounds=True))
    return context.get_dummy_value()

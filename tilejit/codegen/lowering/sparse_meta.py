"""The metadata register of a sparse tensor-core instruction (``T.gemm_sp`` on
``wgmma.mma_async.sp``), read from the metadata tile E in shared memory.

E is TileLang's natural row-major metadata (``language/sparse.py``): row ``m``'s 4-bit
group codes packed from the low bits up, ``e_bits / 4`` groups an element, so the 16
bits describing dense columns ``16 h ... 16 h + 15`` of row ``m`` (four groups of a 16-bit
A) are bits ``16 h % e_bits ...`` of element ``16 h // e_bits`` (8-bit E: elements
``2 h`` and ``2 h + 1``). For 16-bit A, the instruction's k32 step ``kk`` covers the
halves ``h = 2 kk`` and ``2 kk + 1``; thread ``(g, t)`` of warp ``w`` (lane ``4 g + t``)
supplies, with sparsity selector 0, the half ``h = 2 kk + t % 2`` of rows ``16 w + g``
(bits 0-15) and ``16 w + g + 8`` (bits 16-31) of its m16 slice (PTX ISA, "Sparse
matrix metadata" of ``mma.sp`` m16n8k32 and of ``wgmma.mma_async.sp``: threads 0 and 1 of
each quad supply it with selector 0; threads 2 and 3 load the same words, unused).
"""
from __future__ import annotations

from llvmlite import ir

from tilejit.ir.addressing import Var, layout_offset
from tilejit.codegen.lowering.tiles import emit, plan

I32 = ir.IntType(32)


class SparseMetadata:
    """``register(row0, kk)``: the metadata register of the m16 slice whose first row
    is ``row0`` (an i32, this warp's first row of C within the block's gemm), k32 step
    ``kk``; ``lane`` is the thread's lane."""

    def __init__(self, context, builder, e_ty, e_ptr, lane, transposed: bool):
        self.context, self.builder = context, builder
        self.e_ty, self.ptr, self.transposed = e_ty, e_ptr, transposed
        self.tile = plan().tile(e_ty.tile_name)
        self.bits = 8 * self.tile.dtype.itemsize
        self.g = builder.lshr(lane, I32(2))
        self.half = builder.and_(lane, I32(1))

    def _element(self, row, col):
        b = self.builder
        r, c = (col, row) if self.transposed else (row, col)
        offset = emit(b, layout_offset(self.tile.layout, [Var("r"), Var("c")]),
                      {"r": r, "c": c})
        v = self.context.unpack_value(b, self.e_ty.element,
                                      b.gep(self.ptr, [offset], inbounds=True))
        data = self.context.data_model_manager[self.e_ty.element].as_data(b, v)
        return b.zext(data, I32) if self.bits < 32 else data

    def _sixteen(self, row, h):
        """The 16 metadata bits of dense columns 16 h ... 16 h + 15 of ``row`` (an i32
        whose high half is zero)."""
        b = self.builder
        if self.bits == 8:
            lo = self._element(row, b.shl(h, I32(1)))
            hi = self._element(row, b.add(b.shl(h, I32(1)), I32(1)))
            return b.or_(lo, b.shl(hi, I32(8)))
        if self.bits == 16:
            return self._element(row, h)
        word = self._element(row, b.lshr(h, I32(1)))
        return b.and_(b.lshr(word, b.shl(b.and_(h, I32(1)), I32(4))), I32(0xFFFF))

    def register(self, row0, kk: int):
        b = self.builder
        row = b.add(row0, self.g)
        h = b.add(self.half, I32(2 * kk))
        low = self._sixteen(row, h)
        high = self._sixteen(b.add(row, I32(8)), h)
        return b.or_(low, b.shl(high, I32(16)))

"""The two sides of a tile copy (``T.copy`` and the operations built like it: atomics
over regions, TMA, a gemm's pipelined refill): a global tensor, a shared, fragment or
local tile, or a region of one (``Side``), and the addresses of their elements.

A global side's coordinates are i64, each checked against the tensor's run-time shape
where the copy may cross its edge; a tile's are i32, placed by its layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from llvmlite import ir
from numba.core import cgutils

from tilejit.ir.addressing import Var, layout_offset, row_major
from tilejit.layouts import offset_table
from tilejit.codegen.typing.tiles import RegionType
from tilejit.codegen.typing.types import GlobalTensorType
from tilejit.codegen.lowering.tiles import emit, intrinsic, plan

I32, I64 = ir.IntType(32), ir.IntType(64)


@dataclass
class Side:
    ty: object                 # GlobalTensorType | TileType
    kind: str                  # global | shared | fragment | local
    value: object              # tensor struct (global) or tile pointer
    starts: list               # i64 per dimension
    ranged: list | None
    extents: tuple | None
    tensor: object = None      # the struct proxy of a global tensor
    scalar_only: bool = False  # never the vector path (the misaligned fallback)
    # a global tensor's data pointer, shape and strides, read from its struct once where
    # the copy begins (``describe``: every use is after it in the copy's code) instead
    # of a load and an extractvalue per dimension at each use
    data: object = None
    shape: list | None = None
    strides: list | None = None
    # known at compile time (None where nothing is): the tensor's shape entries the
    # specialization fixed (GlobalTensorType.static_shape), the region's integer-literal
    # starts (RegionType.static_starts). Code is still emitted from ``shape`` and
    # ``starts``; these only decide which paths can be taken at all
    static_shape: tuple | None = None
    static_starts: tuple | None = None
    # a region's end per dimension (i64; the largest where its slice names none), read
    # when called
    stops: object = None
    # a region's slices of one element, when its extents are not all known: the points
    # they name where the other operand's extents leave them out (``operands``)
    unit_dims: list = field(default_factory=list)

    @property
    def ndim(self):
        return self.ty.ndim

    @property
    def element(self):
        return self.ty.element

    @property
    def dtype(self):
        return self.ty.dtype


def describe(context, builder, ty, value) -> Side:
    if isinstance(ty, RegionType):
        region = cgutils.create_struct_proxy(ty)(context, builder, value=value)
        base = describe(context, builder, ty.base, region.base)
        base.starts = cgutils.unpack_tuple(builder, region.starts, len(ty.kinds))
        # read where a fill of run-time extent needs them (not at every region's use)
        base.stops = lambda: cgutils.unpack_tuple(builder, region.stops, len(ty.kinds))
        base.static_starts = ty.static_starts
        ranged = [d for d, k in enumerate(ty.kinds) if k == "s"]
        known = [ty.extents[d] for d in ranged] if ty.extents else []
        base.ranged = ranged or None
        base.extents = tuple(known) if known and all(e > 0 for e in known) else None
        # slices of one element, for a copy whose extent the other operand gives
        base.unit_dims = [d for d in ranged if ty.extents and ty.extents[d] == 1] \
            if base.extents is None else []
        return base
    zeros = [I64(0)] * ty.ndim
    if isinstance(ty, GlobalTensorType):
        tensor = cgutils.create_struct_proxy(ty)(context, builder, value=value)
        return Side(ty, "global", value, zeros, list(range(ty.ndim)), None, tensor,
                    data=tensor.data,
                    shape=cgutils.unpack_tuple(builder, tensor.shape, ty.ndim),
                    strides=cgutils.unpack_tuple(builder, tensor.strides, ty.ndim),
                    static_shape=ty.static_shape)
    return Side(ty, ty.kind, value, zeros, list(range(ty.ndim)), tuple(ty.shape))


def side_offsets(side: Side, copy_coords) -> list:
    """The side's coordinate per dimension: start + the copy coordinate it ranges over
    (i64 for global tensors, i32 for tiles); ``copy_coords`` are i32 values or ints."""
    it = iter(copy_coords)
    offsets = []
    for d in range(side.ndim):
        off = 0
        if d in side.ranged:
            if side.extents[side.ranged.index(d)] != 1:
                off = next(it)
        offsets.append(off)
    return offsets


def global_coords(builder, side, offsets):
    out = []
    for start, off in zip(side.starts, offsets):
        if isinstance(off, int) and off == 0:      # start + 0: start, as LLVM folds it
            out.append(start)
            continue
        out.append(builder.add(start, builder.zext(off, I64) if isinstance(off, ir.Value)
                               else I64(off)))
    return out


def element_offset(builder, side, coords):
    """The i64 element offset of global coordinates (each times its stride; the last
    dimension of a contiguous tensor has stride 1)."""
    strides = side.strides
    offset = None
    for d, c in enumerate(coords):
        term = c if (d == side.ndim - 1 and side.ty.contiguous) else builder.mul(c, strides[d])
        offset = term if offset is None else builder.add(offset, term)
    return offset


def global_pointer(builder, side, coords, inbounds=True):
    return builder.gep(side.data, [element_offset(builder, side, coords)],
                       inbounds=inbounds)


def inside_tensor(builder, side, coords):
    shape = side.shape
    ok = None
    for c, n in zip(coords, shape):
        b = builder.icmp_unsigned("<", c, n)
        ok = b if ok is None else builder.and_(ok, b)
    return ok


def inside_tile(builder, side, offsets):
    """Whether start + offset lies inside the tile in every dimension."""
    ok = ir.Constant(ir.IntType(1), 1)
    for start, off, n in zip(side.starts, offsets, plan().tile(side.ty.tile_name).shape):
        o = off if isinstance(off, ir.Value) else I32(off)
        c = builder.add(builder.trunc(start, I32), o)
        ok = builder.and_(ok, builder.icmp_unsigned("<", c, I32(n)))
    return ok


def tile_offset(builder, side, offsets):
    t = plan().tile(side.ty.tile_name)
    coords = []
    for start, off in zip(side.starts, offsets):
        s = builder.trunc(start, I32) if not (isinstance(start, ir.Constant)
                                              and start.constant == 0) else None
        o = off if isinstance(off, ir.Value) else I32(off)
        coords.append(o if s is None else builder.add(s, o))
    if side.kind == "local":
        layout = row_major(t.shape)
    else:
        layout = t.layout
    names = [Var(f"c{k}") for k in range(len(coords))]
    return emit(builder, layout_offset(layout, names), {n.name: c for n, c in zip(names, coords)})


def zero(context, elem):
    return ir.Constant(context.get_value_type(elem), 0)


def load_element(context, builder, side, offsets, checked=True):
    """The element at a copy coordinate (0 outside a global tensor; ``checked=False``:
    the caller knows it is inside)."""
    if side.kind == "global":
        coords = global_coords(builder, side, offsets)
        if not checked:
            ptr = global_pointer(builder, side, coords)
            return context.unpack_value(builder, side.element, ptr, align=side.dtype.itemsize)
        inside = inside_tensor(builder, side, coords)
        with builder.if_else(inside) as (then, otherwise):
            with then:
                ptr = global_pointer(builder, side, coords)
                v = context.unpack_value(builder, side.element, ptr, align=side.dtype.itemsize)
                b1 = builder.block
            with otherwise:
                z = zero(context, side.element)
                b2 = builder.block
        phi = builder.phi(v.type)
        phi.add_incoming(v, b1)
        phi.add_incoming(z, b2)
        return phi
    ptr = builder.gep(side.value, [tile_offset(builder, side, offsets)], inbounds=True)
    return context.unpack_value(builder, side.element, ptr, align=side.dtype.itemsize)


def store_element(context, builder, side, offsets, value, checked=True):
    if side.kind == "global":
        coords = global_coords(builder, side, offsets)
        if not checked:
            context.pack_value(builder, side.element, value, global_pointer(builder, side, coords),
                               align=side.dtype.itemsize)
            return
        with builder.if_then(inside_tensor(builder, side, coords)):
            ptr = global_pointer(builder, side, coords)
            context.pack_value(builder, side.element, value, ptr, align=side.dtype.itemsize)
        return
    ptr = builder.gep(side.value, [tile_offset(builder, side, offsets)], inbounds=True)
    context.pack_value(builder, side.element, value, ptr, align=side.dtype.itemsize)


def element_at(builder, cc):
    """``k → `` the copy coordinates of the k-th element of a run starting at ``cc``,
    built when asked for (in the fallback's block rather than ahead of the vector
    access, where they would hold registers across it)."""
    return lambda k: cc[:-1] + [builder.add(cc[-1], I32(k))] if k else cc


# -- every element, in every thread (local tiles) ----------------------------------------


@lru_cache(maxsize=None)
def chunks_contiguous(layout, shape, vec) -> bool:
    """Whether every run of ``vec`` elements along the last dimension (starting at a
    multiple of vec) is contiguous and vec-aligned in ``layout``: the layout evaluated
    over the whole tile at once (``layouts.offset_table``)."""
    if shape[-1] % vec:
        return False
    runs = offset_table(layout, tuple(shape)).reshape(-1, vec)
    return bool((runs[:, 0] % vec == 0).all()
                and (runs == runs[:, :1] + np.arange(vec, dtype=np.int64)).all())


def side_vector_ok(side: Side, vec: int, last_extent: int) -> bool:
    if vec == 1:
        return True
    if side.kind == "shared":
        t = plan().tile(side.ty.tile_name)
        last = [d for d in side.ranged if side.extents[side.ranged.index(d)] != 1]
        if not last or last[-1] != side.ndim - 1:
            return False
        starts_zero = all(isinstance(s, ir.Constant) and s.constant == 0 for s in side.starts)
        return starts_zero and chunks_contiguous(t.layout, t.shape, vec)
    return True   # global: decided per chunk at run time (or element-wise)


def global_vectorizable(side: Side, vec: int) -> bool:
    if vec == 1 or side.scalar_only or not (side.ty.contiguous and side.ty.aligned):
        return False
    last = [d for d in side.ranged if side.extents[side.ranged.index(d)] != 1]
    return bool(last) and last[-1] == side.ndim - 1


def region_inside(builder, side, shape, last_scale=1):
    """Whether the whole region of a copy lies inside the tensor (a run-time check);
    ``last_scale``: tensor elements per copy element along the last dimension (2 for the
    bytes of an int4 region)."""
    ok = None
    for d, (start, n) in enumerate(zip(side.starts, shape)):
        if d in side.ranged:
            extent = side.extents[side.ranged.index(d)]
            end = builder.add(start, I64(extent * (last_scale if d == side.ndim - 1 else 1)))
            b = builder.icmp_signed("<=", end, n)
        else:
            b = builder.icmp_unsigned("<", start, n)
        b = builder.and_(b, builder.icmp_signed(">=", start, I64(0)))
        ok = b if ok is None else builder.and_(ok, b)
    return ok


def cp_async(builder, smem_ptr, gmem_ptr, nbytes, src_bytes):
    kind = "cg" if nbytes == 16 else "ca"
    name = f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}.s"
    i8 = ir.IntType(8)
    fn = intrinsic(builder, name, ir.VoidType(), [ir.PointerType(i8, 3), ir.PointerType(i8, 1),
                                                  I32])
    dst = builder.bitcast(smem_ptr, ir.PointerType(i8, 3))
    src = builder.bitcast(gmem_ptr, ir.PointerType(i8, gmem_ptr.type.addrspace))
    if gmem_ptr.type.addrspace != 1:
        src = builder.addrspacecast(src, ir.PointerType(i8, 1))
    builder.call(fn, [dst, src, src_bytes])

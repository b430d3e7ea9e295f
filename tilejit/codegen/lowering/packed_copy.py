"""``T.copy`` between an int4 tensor (two elements a byte, element 2k in the low four
bits) and a shared tile (one element a byte: an int4 tile holds int8,
``DType.in_tiles``).

The copy is cut into chunks of 16 consecutive elements along its last axis, dealt
round-robin to the threads, as ``copy.py`` deals a copy between global and shared
memory. A chunk moves as 8 bytes of the tensor and 16 of the tile, one vector access
each, where its tensor side is wholly inside the tensor, starts on a byte and its 8
bytes are 8-byte aligned; otherwise element by element, reading or writing each half
byte (``tensor.packed_load`` / ``packed_store``), with 0 for an element outside the
tensor and nothing written there, as any tile copy clips at a tensor's edge. Where the
whole region is inside and every chunk aligned (the data, the region's last start and
the other strides: one uniform run-time check) the chunks move unchecked; otherwise each
chunk is checked.

Unpacking 8 elements (one 32-bit word w of the tensor) is word arithmetic, no per-byte
work: ``w & 0x0F0F0F0F`` holds elements 0, 2, 4, 6 in its bytes and ``(w >> 4) &
0x0F0F0F0F`` elements 1, 3, 5, 7; a nibble's sign bit (0x08 in each byte) times 0x1E is
0xF0 in that byte alone, which ORed in sign-extends the four nibbles at once; two byte
shuffles (PTX ``prmt``) interleave the halves. Packing is the reverse: the even and
odd elements gathered by two shuffles, the odd ones shifted into the high nibbles.

A software pipeline's copy (``T.Pipelined``) is staged as bytes instead
(``passes/packed_staging.py``): into a byte tile (``Tile.holds_packed``) the region's
bytes, 16 a chunk, one ``cp.async`` each where the region is inside the tensor and
aligned (byte by byte otherwise, zeros outside); ``__tj_unpack_int4`` then turns a stage
of them into the tile, 8 bytes read and 16 written a chunk.
"""
from __future__ import annotations

import math

from llvmlite import ir
from numba.core import cgutils, types

from tilejit.codegen.lowering.copy_sides import (Side, chunks_contiguous, cp_async, describe,
                                                 element_at, element_offset, global_coords,
                                                 inside_tensor, region_inside, side_offsets,
                                                 side_vector_ok, tile_offset)
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar import cast_values
from tilejit.codegen.lowering.tensor import packed_load, packed_store
from tilejit.codegen.lowering.tiles import guarded, plan, rounds, unflatten
from tilejit.codegen.typing.tiles import TileType
from tilejit.ir import markers
from tilejit.ir.kernel_config import current_kernel

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
VEC = 16                                    # elements a chunk: 8 bytes of the tensor
_NIBBLES, _SIGNS = I32(0x0F0F0F0F), I32(0x08080808)
# byte k of a shuffle's result takes byte mask[k] of (a, b) (b's bytes are 4 … 7)
_EVEN_ODD_LOW, _EVEN_ODD_HIGH = [0, 4, 1, 5], [2, 6, 3, 7]     # interleave a's and b's
_EVENS, _ODDS = [0, 2, 4, 6], [1, 3, 5, 7]                     # gather from two words


def _shuffle(builder, a, b, mask):
    """Bytes of the words ``a`` and ``b`` chosen by ``mask``, as a word."""
    v4 = ir.VectorType(I8, 4)
    out = builder.shuffle_vector(builder.bitcast(a, v4), builder.bitcast(b, v4),
                                 ir.Constant(ir.VectorType(I32, 4), [I32(k) for k in mask]))
    return builder.bitcast(out, I32)


def _sign_extend_nibbles(builder, w):
    """Each byte of ``w`` (0 … 15) as the int8 of its four-bit two's complement."""
    signs = builder.and_(w, _SIGNS)
    return builder.or_(w, builder.mul(signs, I32(0x1E)))


def _unpack_word(builder, w, signed=True):
    """The 8 int4 (or uint4) elements of the word ``w`` as two words of int8 (uint8):
    elements 0-3, 4-7."""
    low = builder.and_(w, _NIBBLES)
    high = builder.and_(builder.lshr(w, I32(4)), _NIBBLES)
    if signed:
        low, high = _sign_extend_nibbles(builder, low), _sign_extend_nibbles(builder, high)
    return [_shuffle(builder, low, high, _EVEN_ODD_LOW),
            _shuffle(builder, low, high, _EVEN_ODD_HIGH)]


def _pack_words(builder, a, b):
    """Two words of int8 (elements 0-3, 4-7) as one word of their low nibbles."""
    evens = builder.and_(_shuffle(builder, a, b, _EVENS), _NIBBLES)
    odds = builder.and_(_shuffle(builder, a, b, _ODDS), _NIBBLES)
    return builder.or_(evens, builder.shl(odds, I32(4)))


def is_packed_copy(src: Side, dst: Side) -> bool:
    return any(s.kind == "global" and s.dtype.packed > 1 for s in (src, dst))


def copy_packed(context, builder, src: Side, dst: Side, extents,
                asynchronous: bool = False) -> None:
    """The copy between a packed (int4) tensor and a shared tile: into a tile of its
    bytes (``Tile.holds_packed``) the bytes, asynchronously where asked and the target
    can; else unpacked (or packed) on the way."""
    if dst.kind == "shared" and plan().tile(dst.ty.tile_name).holds_packed:
        _copy_bytes(context, builder, src, dst, extents, asynchronous)
        return
    packed = src if src.kind == "global" else dst
    tile = dst if packed is src else src
    last = extents[-1] if extents else 1
    vec = VEC if (last % VEC == 0 and tile.dtype.name in ("int8", "uint8")
                  and _runs_along_rows(packed) and side_vector_ok(tile, VEC, last)) else 1
    if vec == 1:
        _chunks(context, builder, src, dst, extents, 1, None)
        return
    # a region wholly inside the tensor whose every chunk is 8-byte aligned (the data, the
    # region's last start and the other strides): unchecked vectors
    with builder.if_else(_aligned_inside(builder, packed, VEC), likely=True) as (
            inner, edge):
        with inner:
            _chunks(context, builder, src, dst, extents, vec, True)
        with edge:
            _chunks(context, builder, src, dst, extents, vec, None)


def _runs_along_rows(side) -> bool:
    """Whether the copy's last axis is the tensor's last dimension (its consecutive
    elements, whose bytes a chunk moves): not a column or a pinned last index."""
    ranged = [d for d in side.ranged or () if side.extents[side.ranged.index(d)] != 1]
    return bool(ranged) and ranged[-1] == side.ndim - 1


def _aligned_inside(builder, side, elements, last_scale=1):
    """Whether the region lies inside the tensor and every run of ``elements`` of it (from
    its start) is aligned to its bytes (``elements // 2``): the data, the region's last
    start and the other strides (one uniform check)."""
    odd = builder.and_(builder.ptrtoint(side.data, I64), I64(elements // 2 - 1))
    for value in [side.starts[-1]] + list(side.strides[:-1]):
        odd = builder.or_(odd, builder.and_(value, I64(elements - 1)))
    return builder.and_(region_inside(builder, side, side.shape, last_scale),
                        builder.icmp_unsigned("==", odd, I64(0)))


def _chunk_ok(builder, side, coords, elements, on_byte=False):
    """Whether the run of ``elements`` from ``coords`` lies inside the tensor, starts on a
    byte (``on_byte``: known to) and its bytes are aligned to their count (no pointer to
    a run that may be outside: the address as an integer)."""
    end = list(coords)
    end[-1] = builder.add(coords[-1], I64(elements - 1))
    offset = element_offset(builder, side, coords)
    byte = builder.add(builder.ptrtoint(side.data, I64), builder.ashr(offset, I64(1)))
    misaligned = builder.and_(byte, I64(elements // 2 - 1))
    if not on_byte:
        misaligned = builder.or_(misaligned, builder.and_(offset, I64(1)))
    return builder.and_(builder.and_(inside_tensor(builder, side, coords),
                                     inside_tensor(builder, side, end)),
                        builder.icmp_unsigned("==", misaligned, I64(0)))


def _chunks(context, builder, src, dst, extents, vec, fast):
    """Every chunk of this thread's round-robin share; ``fast``: True (each chunk is
    inside and aligned) or None (checked per chunk)."""
    packed = src if src.kind == "global" else dst
    tile = dst if packed is src else src
    chunks = math.prod(extents) // vec if extents else 1
    staged = []
    for chunk, guard in rounds(context, builder, chunks):
        cc = unflatten(builder, builder.mul(chunk, I32(vec)), extents)
        at = element_at(builder, cc)
        if packed is not src:
            with guarded(builder, guard):
                _store(context, builder, src, dst, at, vec, fast)
            continue
        # a guarded chunk's value crosses from its load's block to its store's in memory
        holder = None
        with guarded(builder, guard):
            value = _load(context, builder, src, tile, at, vec, fast)
            if guard is not None:
                holder = cgutils.alloca_once(builder, value.type)
                builder.store(value, holder)
        staged.append((guard, at, value, holder))
    for guard, at, value, holder in staged:  # every chunk's loads in flight, then the stores
        with guarded(builder, guard):
            value = builder.load(holder) if holder is not None else value
            ptr = builder.gep(tile.value, [tile_offset(builder, tile,
                                                       side_offsets(tile, at(0)))],
                              inbounds=True)
            if vec == 1:
                context.pack_value(builder, tile.element, value, ptr, align=1)
            else:
                builder.store(value, builder.bitcast(ptr, value.type.as_pointer(
                    ptr.type.addrspace)), align=16)


def _chunk_place(builder, side, at, vec, fast):
    """(first element's offset, whether the chunk may move as whole bytes: ``fast`` when
    the caller knows, else checked here)."""
    coords = global_coords(builder, side, side_offsets(side, at(0)))
    offset = element_offset(builder, side, coords)
    if vec == 1 or fast is not None:
        return offset, fast
    return offset, _chunk_ok(builder, side, coords, vec)


def _element(builder, side, at, k):
    """Element k of the chunk from the packed tensor: its value (i8), 0 outside."""
    coords = global_coords(builder, side, side_offsets(side, at(k)))
    return _inside_or_zero(builder, side, coords, lambda offset: packed_load(
        builder, side.data, offset, side.dtype))


def _inside_or_zero(builder, side, coords, read):
    """``read(element offset)`` (an i8) where ``coords`` are inside the tensor, else 0."""
    with builder.if_else(inside_tensor(builder, side, coords)) as (then, otherwise):
        with then:
            v = read(element_offset(builder, side, coords))
            b1 = builder.block
        with otherwise:
            b2 = builder.block
    phi = builder.phi(I8)
    phi.add_incoming(v, b1)
    phi.add_incoming(I8(0), b2)
    return phi


def _unpacked(builder, byte, signed):
    """The 16 elements of the 8 bytes at ``byte`` (8-byte aligned), loaded: four words of
    int8 (uint8 where not ``signed``)."""
    two = builder.load(builder.bitcast(byte, ir.VectorType(I32, 2).as_pointer(
        byte.type.addrspace)), align=8)
    words = []
    for k in range(2):
        words += _unpack_word(builder, builder.extract_element(two, I32(k)), signed)
    whole = ir.Constant(ir.VectorType(I32, 4), None)
    for k, w in enumerate(words):
        whole = builder.insert_element(whole, w, I32(k))
    return whole


def _load(context, builder, src, tile, at, vec, fast):
    """One chunk of the tensor: a vector of four words of int8 (vec 16), or one element
    in the tile's dtype (vec 1)."""
    if vec == 1:
        v = _element(builder, src, at, 0)
        return cast_values(context, builder, [v], src.element, tile.element)[0]
    offset, fast = _chunk_place(builder, src, at, vec, fast)
    signed = src.dtype.kind == "int"

    def unpacked():
        return _unpacked(builder, builder.gep(src.data, [builder.ashr(offset, I64(1))],
                                              inbounds=True), signed)

    if fast is True:
        return unpacked()
    vt = ir.VectorType(I32, 4)
    with builder.if_else(fast, likely=True) as (then, otherwise):
        with then:
            whole = unpacked()
            b1 = builder.block
        with otherwise:
            parts = ir.Constant(ir.VectorType(I8, VEC), None)
            for k in range(VEC):
                parts = builder.insert_element(parts, _element(builder, src, at, k), I32(k))
            parts = builder.bitcast(parts, vt)
            b2 = builder.block
    phi = builder.phi(vt)
    phi.add_incoming(whole, b1)
    phi.add_incoming(parts, b2)
    return phi


def _store(context, builder, tile, dst, at, vec, fast):
    """One chunk of the tile into the tensor: 8 bytes where the chunk is inside and
    aligned, else element by element (inside the tensor only)."""
    ptr = builder.gep(tile.value, [tile_offset(builder, tile, side_offsets(tile, at(0)))],
                      inbounds=True)
    if vec == 1:
        v = context.unpack_value(builder, tile.element, ptr, align=tile.dtype.itemsize)
        v = cast_values(context, builder, [v], tile.element, dst.element)[0]
        coords = global_coords(builder, dst, side_offsets(dst, at(0)))
        with builder.if_then(inside_tensor(builder, dst, coords)):
            packed_store(builder, dst.data, element_offset(builder, dst, coords), v)
        return
    vt = ir.VectorType(I32, 4)
    raw = builder.load(builder.bitcast(ptr, vt.as_pointer(ptr.type.addrspace)), align=16)
    offset, fast = _chunk_place(builder, dst, at, vec, fast)
    if fast is True:
        _packed_out(builder, raw, dst.data, offset)
        return
    with builder.if_else(fast, likely=True) as (then, otherwise):
        with then:
            _packed_out(builder, raw, dst.data, offset)
        with otherwise:
            values = builder.bitcast(raw, ir.VectorType(I8, VEC))
            for k in range(VEC):
                coords = global_coords(builder, dst, side_offsets(dst, at(k)))
                with builder.if_then(inside_tensor(builder, dst, coords)):
                    packed_store(builder, dst.data, element_offset(builder, dst, coords),
                                 builder.extract_element(values, I32(k)))


def _packed_out(builder, raw, data, offset):
    """Four words of int8 stored as the 8 bytes of their 16 elements from element
    ``offset`` (even, 8-byte aligned)."""
    two = ir.Constant(ir.VectorType(I32, 2), None)
    for k in range(2):
        word = _pack_words(builder, builder.extract_element(raw, I32(2 * k)),
                           builder.extract_element(raw, I32(2 * k + 1)))
        two = builder.insert_element(two, word, I32(k))
    byte = builder.gep(data, [builder.ashr(offset, I64(1))], inbounds=True)
    builder.store(two, builder.bitcast(byte, two.type.as_pointer(byte.type.addrspace)),
                  align=8)


# -- a pipeline's staged bytes (passes/packed_staging.py) ---------------------------------

BYTES = 16                                  # bytes a chunk of a byte copy: 32 elements


def _copy_bytes(context, builder, src, dst, extents, asynchronous):
    """The bytes of an int4 region (its corner ``src``; the copy's extents the byte tile's,
    the region's last extent twice its last) into the byte tile ``dst``: 16 bytes a chunk,
    one ``cp.async`` (or a load and a store) each, unchecked where the whole region is
    inside the tensor and 16-byte aligned; otherwise each chunk so where it is inside and
    aligned, else byte by byte, 0 for a byte outside the tensor."""
    last = extents[-1] if extents else 1
    vec = BYTES if (last % BYTES == 0 and _runs_along_rows(src)
                    and side_vector_ok(dst, BYTES, last)) else 1
    chunks = math.prod(extents) // vec

    def each(body):
        for chunk, guard in rounds(context, builder, chunks):
            cc = unflatten(builder, builder.mul(chunk, I32(vec)), extents)
            with guarded(builder, guard):
                ptr = builder.gep(dst.value, [tile_offset(builder, dst,
                                                          side_offsets(dst, cc))],
                                  inbounds=True)
                body(_first_element(builder, src, cc), ptr)

    def gathered(first, ptr):
        _store_bytes(builder, ptr, [_byte(builder, src, first, k) for k in range(vec)])

    if vec == 1:
        each(gathered)
        return
    async_ = asynchronous and current_kernel().target.has_cp_async

    def whole(first, ptr):
        source = builder.gep(src.data, [builder.ashr(element_offset(builder, src, first),
                                                     I64(1))], inbounds=True)
        if async_:
            cp_async(builder, ptr, source, BYTES, I32(BYTES))
            return
        vt = ir.VectorType(I32, 4)
        raw = builder.load(builder.bitcast(source, vt.as_pointer(source.type.addrspace)),
                           align=BYTES)
        builder.store(raw, builder.bitcast(ptr, vt.as_pointer(ptr.type.addrspace)),
                      align=BYTES)

    def checked(first, ptr):
        """A chunk of an edge region: whole where it is inside and aligned (an aligned
        region crossing the tensor's edge keeps its inner chunks' cp.async)."""
        ok = _chunk_ok(builder, src, first, 2 * BYTES, on_byte=True)
        with builder.if_else(ok, likely=True) as (then, otherwise):
            with then:
                whole(first, ptr)
            with otherwise:
                gathered(first, ptr)

    with builder.if_else(_aligned_inside(builder, src, 2 * BYTES, last_scale=2),
                         likely=True) as (inner, edge):
        with inner:
            each(whole)
        with edge:
            each(checked)


def _first_element(builder, src, cc):
    """The tensor coordinates of the first element of the bytes at copy coordinates ``cc``
    (the last counted in bytes: two elements each)."""
    doubled = list(cc[:-1]) + [builder.shl(cc[-1], I32(1))] if cc else cc
    return global_coords(builder, src, side_offsets(src, doubled))


def _byte(builder, src, first, k):
    """Byte k from the element ``first``: elements 2k and 2k+1 of the run (0 outside)."""
    coords = list(first)
    coords[-1] = builder.add(first[-1], I64(2 * k)) if k else first[-1]
    return _inside_or_zero(builder, src, coords, lambda offset: builder.load(
        builder.gep(src.data, [builder.ashr(offset, I64(1))], inbounds=True)))


def _store_bytes(builder, ptr, values):
    if len(values) == 1:
        builder.store(values[0], ptr)
        return
    vt = ir.VectorType(I8, len(values))
    raw = ir.Constant(vt, None)
    for k, v in enumerate(values):
        raw = builder.insert_element(raw, v, I32(k))
    builder.store(raw, builder.bitcast(ptr, vt.as_pointer(ptr.type.addrspace)),
                  align=len(values))


@lower(markers.stub(markers.UNPACK_INT4), TileType, TileType, types.BooleanLiteral)
def unpack_int4_impl(context, builder, sig, args):
    """The staged bytes unpacked into the tile: 16 elements a chunk (8 bytes read, 16
    written) dealt round-robin to the threads, all reads before the writes; the third
    argument: whether the elements are signed (int4) or not (uint4)."""
    signed = sig.args[2].literal_value
    packed = describe(context, builder, sig.args[0], args[0])
    tile = describe(context, builder, sig.args[1], args[1])
    shape = tuple(sig.args[1].shape)
    whole = chunks_contiguous(plan().tile(tile.ty.tile_name).layout, shape, VEC) and \
        chunks_contiguous(plan().tile(packed.ty.tile_name).layout,
                          tuple(sig.args[0].shape), VEC // 2)
    vec = VEC if whole else 1
    staged = []
    for chunk, guard in rounds(context, builder, math.prod(shape) // vec):
        cc = unflatten(builder, builder.mul(chunk, I32(vec)), shape)
        at = list(cc[:-1]) + [builder.lshr(cc[-1], I32(1))]
        source = builder.gep(packed.value, [tile_offset(builder, packed, at)], inbounds=True)
        holder = None
        with guarded(builder, guard):
            if whole:
                value = _unpacked(builder, source, signed)
            else:                       # one element: its half of the byte
                half = builder.trunc(builder.shl(builder.and_(cc[-1], I32(1)), I32(2)), I8)
                top = builder.shl(builder.load(source), builder.sub(I8(4), half))
                value = builder.ashr(top, I8(4)) if signed else builder.lshr(top, I8(4))
            if guard is not None:
                holder = cgutils.alloca_once(builder, value.type)
                builder.store(value, holder)
        staged.append((guard, cc, value, holder))
    for guard, cc, value, holder in staged:
        with guarded(builder, guard):
            value = builder.load(holder) if holder is not None else value
            ptr = builder.gep(tile.value, [tile_offset(builder, tile, cc)], inbounds=True)
            builder.store(value, builder.bitcast(ptr, value.type.as_pointer(
                ptr.type.addrspace)), align=vec)
    return context.get_dummy_value()

"""``T.copy(src, dst)``: one lowering rule for every pair of operands.

Which thread moves which element:
- a fragment on either side: each thread moves its own slots (the fragment's layout);
- a local tile on either side: each thread moves every element (its own array);
- otherwise (global and shared, any mix): the copy is cut into chunks of ``vec``
  consecutive elements along its last axis, dealt round-robin to the threads. A shared
  side moves a chunk as one vector access (the layout keeps chunks contiguous, swizzled
  or not); a global side does too when the tensor is contiguous and 16-byte aligned
  (the specialization says so), the region's last start is a multiple of ``vec`` and
  the chunk is inside the tensor; otherwise element by element.

Global elements outside the tensor's run-time shape are never read (0 is copied
instead) and never written. Values convert to the destination's dtype.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from llvmlite import ir
from numba.core import cgutils, types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.ir.addressing import evaluate
from tilejit.ir.regions import RegionError, copy_dims, tile_governs
from tilejit.codegen.typing.tiles import RegionType
from tilejit.codegen.typing.types import GlobalTensorType
from tilejit.codegen.lowering.chunk_addresses import ChunkAddresses, round_plan
from tilejit.codegen.lowering.slot_offsets import RunOffsets, run_plan
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar import cast_values, narrowed_pair
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.lowering.tiles import (SlotMemo, fragment_slot, guarded, intrinsic,
                                            opaque, plan, rounds, thread_index, unflatten,
                                            writer_guard)
from tilejit.codegen.lowering.copy_sides import (Side, describe, element_at, element_offset,
                                                 global_coords, global_pointer,
                                                 global_vectorizable, inside_tensor,
                                                 inside_tile, load_element, region_inside,
                                                 cp_async,
                                                 side_offsets,
                                                 side_vector_ok, store_element, tile_offset)
from tilejit.codegen.lowering import packed_copy

I32, I64 = ir.IntType(32), ir.IntType(64)


@lru_cache(maxsize=None)
def _slot_runs(ix, threads: int, shape: tuple, max_run: int) -> tuple:
    """(first slot, length) runs of a fragment's slots that hold consecutive elements of
    its last dimension at every thread (aligned to the run length), so a run moves as
    one vector access. The slot coordinates of every (slot, thread) are evaluated at
    once, on numpy arrays (one symbolic evaluation per coordinate, not one per slot and
    thread: 0.55 s of a GEMM's compile before)."""
    n = ix.slots
    last = len(shape) - 1
    env = {"t": np.arange(threads, dtype=np.int64)[None, :],
           "s": np.arange(n, dtype=np.int64)[:, None]}
    coords = [np.broadcast_to(np.asarray(evaluate(c, env), dtype=np.int64), (n, threads))
              for c in ix.coords]
    valid = np.ones((n, threads), dtype=bool) if ix.valid is None else np.broadcast_to(
        np.asarray(evaluate(ix.valid, env)).astype(bool), (n, threads))

    def consecutive(s, length) -> bool:
        """Slots s … s+length-1 hold one aligned run of the last dimension everywhere."""
        base = coords[last][s]
        if (base % length).any():
            return False
        for k in range(1, length):
            if ((valid[s + k] != valid[s]).any() or (coords[last][s + k] != base + k).any()
                    or any((coords[d][s + k] != coords[d][s]).any() for d in range(last))):
                return False
        return True

    runs, s = [], 0
    while s < n:
        length = max_run
        while length > 1 and (s % length or s + length > n or not consecutive(s, length)):
            length //= 2
        runs.append((s, length))
        s += length
    return tuple(runs)


# Stores of a fragment with fewer slots per thread than this check each run instead of
# taking the interior branch: the second copy of the stores costs registers that such a
# kernel spends on occupancy (LayerNorm 1x8192 at 256 threads, 32 slots: 94 registers and
# 2 blocks per SM with the branch, 80 and 3 without; 0.71 vs 0.93 of copy bandwidth,
# H200); an mma accumulator's (64 and more) is where the per-run checks spill.
_VERSIONED_STORE_SLOTS = 64


def _copy_by_fragment(context, builder, src, dst, extents):
    frag_side = src if src.kind == "fragment" else dst
    other = dst if src.kind == "fragment" else src
    t = plan().tile(frag_side.ty.tile_name)
    ix = t.indexing
    runs = tuple((s, 1) for s in range(ix.slots))
    if other.kind == "fragment" and ix.valid is None:
        # the same slots of both: in pairs, for the packed narrowing conversion
        runs = tuple((s, min(2, ix.slots - s)) for s in range(0, ix.slots, 2))
    fast = None
    if other.kind in ("global", "shared") and t.shape[-1] > 1:
        max_run = max(1, 16 // other.dtype.itemsize)
        runs = _slot_runs(ix, plan().threads, tuple(t.shape), max_run)
        if other.kind == "global" and global_vectorizable(other, 2):
            fast = _aligned_start(builder, other, max(length for _, length in runs))
    if fast is None or dst.kind == "global" and ix.slots < _VERSIONED_STORE_SLOTS:
        _fragment_runs(context, builder, src, dst, t, runs, fast)
        return
    # a region wholly inside the tensor with an aligned start (every block's but the
    # edges') moves every run as one unchecked vector access: loads all in flight
    # together, stores without a bounds check per run (the GEMM epilogue: 236 registers,
    # no spills, and the bias-and-ReLU example's epilogue spills are gone)
    shape = other.shape
    interior = builder.and_(fast, region_inside(builder, other, shape))
    with builder.if_else(interior, likely=True) as (inner, edge):
        with inner:
            _fragment_runs(context, builder, src, dst, t, runs, True)
        with edge:
            _fragment_runs(context, builder, src, dst, t, runs, fast)


def _fragment_runs(context, builder, src, dst, t, runs, fast):
    """Each run of this thread's fragment slots to or from the other side; ``fast`` as
    in ``_load_chunk``."""
    other = dst if src.kind == "fragment" else src
    ix = t.indexing
    tid = thread_index(context, builder)
    writer = writer_guard(builder, ix, tid) if dst.kind != "fragment" else None
    memo = SlotMemo()     # each run's code follows the previous one's: values dominate
    # runs narrower than 8 bytes stay scalar when loaded: the vector path's fallback
    # code costs registers that an mma accumulator cannot spare. Stored to global
    # or shared memory (an epilogue) 4 bytes are worth it: an fp16 accumulator's pairs go out
    # as one store each instead of two, without the permute between them (ncu,
    # H200: in the 128x128x64 GEMM the permute waited for the previous store to
    # read the register it reuses; 12 % of the stall samples were in that epilogue)
    least = 4 if dst.kind in ("global", "shared") else 8
    vector = [length > 1 and fast is True or length * other.dtype.itemsize >= least and (
        other.kind == "global" and fast is not None
        or other.kind == "shared" and side_vector_ok(other, length, 0)) for _, length in runs]
    # the runs whose shared address is one access's: their offsets from a few bases
    offsets = _shared_run_offsets(builder, other, t, runs, [
        v or length == 1 for v, (_, length) in zip(vector, runs)])
    for r, (s0, length) in enumerate(runs):
        tile_coords, guard = fragment_slot(builder, ix, tid, s0, writer, memo)
        cc = [c for c, n in zip(tile_coords, t.shape) if n != 1]
        at = element_at(builder, cc)
        vec_ok = vector[r]
        # the shared side's address, outside the guard: later runs reuse its base
        ptr = None
        if offsets is not None and offsets.covers(r):
            ptr = offsets.pointer(other.value, r,
                                  lambda cc=cc: tile_offset(builder, other,
                                                            side_offsets(other, cc)))
        with guarded(builder, guard):
            if src.kind == "fragment":
                values = [context.unpack_value(builder, src.element,
                                               builder.gep(src.value, [I32(s0 + k)]))
                          for k in range(length)]
            elif ptr is not None:
                values = _load_vector(context, builder, src, ptr, length)
            elif vec_ok:
                values = _load_chunk(context, builder, src,
                                     lambda k, at=at: side_offsets(src, at(k)), length, fast)
            else:
                values = [load_element(context, builder, src, side_offsets(src, at(k)),
                                       fast is not True)
                          for k in range(length)]
            bits = None
            if ptr is not None and dst.kind == "shared" and length == 2:
                bits = narrowed_pair(builder, values, src.element, dst.element)
            if bits is not None:     # a packed conversion's two halves: its register
                builder.store(bits, builder.bitcast(ptr, ir.PointerType(I32, 3)), align=4)
                continue
            values = cast_values(context, builder, values, src.element, dst.element)
            if dst.kind == "fragment":
                for k, v in enumerate(values):
                    context.pack_value(builder, dst.element, v,
                                       builder.gep(dst.value, [I32(s0 + k)]))
            elif ptr is not None:
                _store_vector(context, builder, dst, ptr, values)
            elif vec_ok:
                _store_chunk(context, builder, dst, lambda k, at=at: side_offsets(dst, at(k)),
                             values, length, fast)
            else:
                for k, v in enumerate(values):
                    store_element(context, builder, dst, side_offsets(dst, at(k)), v,
                                  fast is not True)


def _shared_run_offsets(builder, side, t, runs, covered):
    """A ``RunOffsets`` for the ``covered`` runs of fragment tile ``t`` in a shared side
    whose starts are IR constants (a whole tile), or None (another side, or a region: its
    starts are read from the region's struct, even where they are literals in the source,
    ``Side.static_starts``; the plan would take those)."""
    if side.kind != "shared" or not all(isinstance(s, ir.Constant) for s in side.starts):
        return None
    # which fragment coordinate each dimension of the shared tile takes (None: its start)
    frag_dims = [d for d, n in enumerate(t.shape) if n != 1]
    sources = side_offsets(side, [(frag_dims[i],) for i in range(len(frag_dims))])
    dims = tuple((k[0] if isinstance(k, tuple) else None, start.constant)
                 for k, start in zip(sources, side.starts))
    layout = plan().tile(side.ty.tile_name).layout
    index = {r: k for k, r in enumerate(r for r, c in enumerate(covered) if c)}
    firsts = tuple(runs[r][0] for r in index)
    return RunOffsets(builder, run_plan(t.indexing, plan().threads, layout, dims, firsts), index)


def _copy_serial(context, builder, src, dst, extents):
    import itertools
    for cc in itertools.product(*(range(n) for n in extents)):
        v = load_element(context, builder, src, side_offsets(src, list(cc)))
        store_element(context, builder, dst, side_offsets(dst, list(cc)),
                      context.cast(builder, v, src.element, dst.element))


# -- global/shared chunks ------------------------------------------------------------------

def _vector_type(context, elem, vec):
    return ir.VectorType(context.get_data_type(elem), vec)


def _load_vector(context, builder, side, ptr, vec, inside=None):
    """``vec`` consecutive elements from ``ptr`` (shared or global), one access;
    ``inside``: an i1, zeros (and no access) where it does not hold."""
    if vec == 1 and inside is None:
        return [context.unpack_value(builder, side.element, ptr, align=side.dtype.itemsize)]
    return _unpack(context, builder, side, _load_raw(context, builder, side, ptr, vec, inside))


def _load_raw(context, builder, side, ptr, vec, inside=None):
    """The vector of ``vec`` elements (their data representation) at ``ptr``."""
    vt = _vector_type(context, side.element, vec)

    def load():
        return builder.load(builder.bitcast(ptr, ir.PointerType(vt, ptr.type.addrspace)),
                            align=vec * side.dtype.itemsize)

    if inside is None:
        return load()
    with builder.if_else(inside, likely=True) as (then, otherwise):
        with then:
            loaded, then_block = load(), builder.block
        with otherwise:
            else_block = builder.block
    raw = builder.phi(vt)
    raw.add_incoming(loaded, then_block)
    raw.add_incoming(ir.Constant(vt, None), else_block)
    return raw


def _unpack(context, builder, side, raw):
    return [_from_data(context, builder, side.element, builder.extract_element(raw, I32(k)))
            for k in range(raw.type.count)]


def _pack(context, builder, side, values):
    raw = ir.Constant(_vector_type(context, side.element, len(values)), None)
    for k, v in enumerate(values):
        raw = builder.insert_element(raw, _as_data(context, builder, side.element, v), I32(k))
    return raw


def _store_vector(context, builder, side, ptr, values):
    """``values`` to consecutive elements from ``ptr`` (shared or global), one access."""
    if len(values) == 1:
        context.pack_value(builder, side.element, values[0], ptr, align=side.dtype.itemsize)
        return
    _store_raw(builder, side, ptr, _pack(context, builder, side, values))


def _store_raw(builder, side, ptr, raw):
    builder.store(raw, builder.bitcast(ptr, ir.PointerType(raw.type, ptr.type.addrspace)),
                  align=raw.type.count * side.dtype.itemsize)


def _load_chunk(context, builder, side, at, vec, fast, known_edges=False):
    """``vec`` element values of one chunk; ``at(k)``: the k-th element's offsets.
    ``fast``: None (element by element), True (one unchecked vector access: the caller
    knows the chunk is inside and aligned) or an i1 (vector when it holds and the chunk
    is inside, else element by element)."""
    if side.kind == "shared":
        ptr = builder.gep(side.value, [tile_offset(builder, side, at(0))], inbounds=True)
        return _load_vector(context, builder, side, ptr, vec)
    if fast is None:
        return [load_element(context, builder, side, at(k)) for k in range(vec)]
    vt = _vector_type(context, side.element, vec)
    if fast is True:
        ptr = global_pointer(builder, side, global_coords(builder, side, at(0)))
        return _load_vector(context, builder, side, ptr, vec)
    # global with a vector path when the chunk is inside and aligned
    slot = cgutils.alloca_once(builder, vt)
    coords = global_coords(builder, side, at(0))
    last = [c for c in coords]
    last[-1] = builder.add(coords[-1], I64(vec - 1))
    ok = builder.and_(fast, inside_tensor(builder, side, last))
    ok = builder.and_(ok, inside_tensor(builder, side, coords))
    with builder.if_else(ok, likely=True) as (then, otherwise):
        with then:
            ptr = global_pointer(builder, side, coords)
            raw = builder.load(builder.bitcast(ptr, ir.PointerType(vt, ptr.type.addrspace)),
                               align=vec * side.dtype.itemsize)
            builder.store(raw, slot)
        with otherwise:
            raw = ir.Constant(vt, None)     # zeros
            if not (known_edges and _chunk_all_or_none(side, vec)):
                for k in range(vec):
                    v = load_element(context, builder, side, at(k))
                    raw = builder.insert_element(
                        raw, _as_data(context, builder, side.element, v), I32(k))
            builder.store(raw, slot)
    raw = builder.load(slot)
    return [_from_data(context, builder, side.element, builder.extract_element(raw, I32(k)))
            for k in range(vec)]


def _store_chunk(context, builder, side, at, values, vec, fast, known_edges=False):
    if side.kind == "shared" and vec > 1:
        ptr = builder.gep(side.value, [tile_offset(builder, side, at(0))], inbounds=True)
        _store_vector(context, builder, side, ptr, values)
        return
    if fast is None:
        for k, v in enumerate(values):
            store_element(context, builder, side, at(k), v)
        return
    coords = global_coords(builder, side, at(0))

    def vector_store():
        _store_vector(context, builder, side, global_pointer(builder, side, coords), values)

    if fast is True:
        vector_store()
        return
    last = list(coords)
    last[-1] = builder.add(coords[-1], I64(vec - 1))
    ok = builder.and_(fast, builder.and_(inside_tensor(builder, side, coords),
                                          inside_tensor(builder, side, last)))
    if known_edges and _chunk_all_or_none(side, vec):     # outside: nothing to store
        with builder.if_then(ok, likely=True):
            vector_store()
        return
    with builder.if_else(ok, likely=True) as (then, otherwise):
        with then:
            vector_store()
        with otherwise:
            for k, v in enumerate(values):
                store_element(context, builder, side, at(k), v)


def _from_data(context, builder, elem, raw):
    return context.data_model_manager[elem].from_data(builder, raw)


def _as_data(context, builder, elem, value):
    return context.data_model_manager[elem].as_data(builder, value)


def _aligned_start(builder, side, vec):
    """Run-time check that the region's last start is a multiple of vec."""
    start = side.starts[-1]
    if isinstance(start, ir.Constant):
        return ir.IntType(1)(1)
    return builder.icmp_unsigned("==", builder.and_(start, I64(vec - 1)), I64(0))


def _known_aligned(side, vec) -> bool:
    """Whether the region's last start is known at compile time to be a multiple of vec
    (an integer literal, or the 0 of a whole tensor): ``_aligned_start`` is then true
    whenever the copy runs. The check itself stays a run-time value (LLVM folds it),
    which leaves the optimized code as it was."""
    start = side.starts[-1]
    if isinstance(start, ir.Constant):
        return start.constant % vec == 0
    known = side.static_starts[-1] if side.static_starts else None
    return known is not None and known % vec == 0


def _chunk_all_or_none(side, vec) -> bool:
    """Whether each chunk of ``vec`` elements of a global side is known at compile time
    to lie wholly inside the tensor or wholly outside it, so the element-by-element path
    of a chunk crossing the tensor's last edge is never taken: the region's last start
    and the tensor's last extent (a shape entry of the specialization) are multiples of
    vec, and the chunk's elements share every other coordinate."""
    n = side.static_shape[-1] if side.static_shape else None
    return n is not None and n % vec == 0 and _known_aligned(side, vec)


def _copy_distributed(context, builder, src, dst, extents, asynchronous=False):
    if packed_copy.is_packed_copy(src, dst):       # an int4 tensor: never asynchronous
        packed_copy.copy_packed(context, builder, src, dst, extents, asynchronous)
        return
    total = math.prod(extents) if extents else 1
    last = extents[-1] if extents else 1
    vec = 16 // max(src.dtype.itemsize, dst.dtype.itemsize)
    while vec > 1 and (last % vec or not side_vector_ok(src, vec, last)
                       or not side_vector_ok(dst, vec, last)):
        vec //= 2
    fast = {}
    for side in (src, dst):
        if side.kind == "global" and global_vectorizable(side, vec):
            fast[id(side)] = _aligned_start(builder, side, vec)
    chunks = total // vec
    if (asynchronous and id(src) in fast and dst.kind == "shared" and src.dtype == dst.dtype
            and vec * src.dtype.itemsize in (4, 8, 16)):
        _copy_async_chunks(context, builder, src, dst, extents, vec, chunks, fast[id(src)])
        return
    glob = src if id(src) in fast else dst if id(dst) in fast else None
    if glob is None:
        _chunks(context, builder, src, dst, extents, vec, chunks, {})
        return
    # a region wholly inside the tensor with an aligned start moves unchecked vectors
    shape = glob.shape
    interior = builder.and_(fast[id(glob)], region_inside(builder, glob, shape))
    other = dst if glob is src else src
    with builder.if_else(interior, likely=True) as (inner, edge):
        with inner:
            addresses = None
            if other.kind == "shared":
                addresses = _chunk_addresses(context, builder, glob, other, extents, vec,
                                             opaque_steps=False)
            if addresses is not None:
                _planned_chunks(context, builder, src, dst, vec, chunks, addresses, False)
            else:
                _chunks(context, builder, src, dst, extents, vec, chunks, {id(glob): True})
        with edge:
            addresses = None
            if other.kind == "shared" and _chunk_all_or_none(glob, vec):
                addresses = _chunk_addresses(context, builder, glob, other, extents, vec,
                                             inside=False, opaque_steps=False)
            if addresses is not None:
                _planned_chunks(context, builder, src, dst, vec, chunks, addresses, True)
            else:
                _chunks(context, builder, src, dst, extents, vec, chunks, fast)


def _chunks(context, builder, src, dst, extents, vec, chunks, fast):
    """Every chunk of this thread's round-robin share, all loads first, then all
    stores: the loads of every chunk are in flight together instead of one global
    round trip per chunk. ``fast``: id(side) → as in ``_load_chunk``."""
    staged = []
    for chunk, guard in rounds(context, builder, chunks):
        cc = unflatten(builder, builder.mul(chunk, I32(vec)), extents)
        at = element_at(builder, cc)
        holder = cgutils.alloca_once(builder, _vector_type(context, dst.element, vec)) \
            if guard is not None else None
        with guarded(builder, guard):
            values = _load_chunk(context, builder, src,
                                 lambda k, at=at: side_offsets(src, at(k)), vec,
                                 fast.get(id(src)), known_edges=True)
            values = cast_values(context, builder, values, src.element, dst.element)
            _hold(context, builder, dst, values, holder)
        staged.append((guard, at, values, holder))
    for guard, at, values, holder in staged:
        with guarded(builder, guard):
            values = _held(context, builder, dst, values, holder)
            _store_chunk(context, builder, dst, lambda k, at=at: side_offsets(dst, at(k)),
                         values, vec,
                         fast.get(id(dst)), known_edges=True)


def _planned_chunks(context, builder, src, dst, vec, chunks, addresses, checked):
    """``_chunks`` between a global side and a shared one with a ChunkAddresses: each
    round's pointers are round 0's plus constant steps, instead of each chunk's
    coordinates and addresses computed from its index; a copy without a conversion
    moves each chunk as one vector, never taken apart (FlashAttention's Q tile: 2,023
    lowered instructions before, 1,116 with the steps, 604 with whole vectors).
    ``checked``: the region may cross the tensor's edge, each chunk wholly inside it or
    wholly outside (``_chunk_all_or_none``): a chunk outside reads zeros and writes
    nothing."""
    glob = src if src.kind == "global" else dst
    same = src.element == dst.element
    vt = _vector_type(context, dst.element, vec)
    staged = []
    for r, (_, guard) in enumerate(rounds(context, builder, chunks)):
        shared_ptr, global_ptr = addresses.pointers(r)
        ptrs = (global_ptr, shared_ptr) if glob is src else (shared_ptr, global_ptr)
        inside = None
        if checked:
            delta = side_offsets(glob, list(addresses.deltas[r]))
            inside = inside_tensor(builder, glob, [builder.add(c, I64(k)) if k else c
                                             for c, k in zip(addresses.coords0, delta)])
        holder = cgutils.alloca_once(builder, vt) if guard is not None else None
        with guarded(builder, guard):
            raw = _load_raw(context, builder, src, ptrs[0], vec,
                            inside if glob is src else None)
            if not same:
                values = cast_values(context, builder, _unpack(context, builder, src, raw),
                                     src.element, dst.element)
                raw = _pack(context, builder, dst, values)
            if holder is not None:
                builder.store(raw, holder)
        staged.append((guard, ptrs[1], raw, holder, None if glob is src else inside))
    for guard, ptr, raw, holder, inside in staged:
        with guarded(builder, guard):
            if holder is not None:
                raw = builder.load(holder)
            with guarded(builder, inside):
                _store_raw(builder, dst, ptr, raw)


def _hold(context, builder, side, values, holder):
    """Keep a guarded chunk's values in ``holder`` (None: no guard, nothing to keep)."""
    if holder is not None:
        builder.store(_pack(context, builder, side, values), holder)


def _held(context, builder, side, values, holder):
    """The values ``_hold`` kept (``values`` themselves where nothing was held)."""
    return values if holder is None else _unpack(context, builder, side, builder.load(holder))


def _copy_async_edge(context, builder, src, dst, extents, vec, chunks, shape, addresses):
    """cp.async of a tile that crosses the tensor's edge: each chunk copies the bytes
    inside the tensor and zero-fills the rest. With ``addresses`` (a ChunkAddresses)
    each round's coordinates are round 0's plus constants."""
    itemsize = src.dtype.itemsize
    if addresses is not None:
        first = [opaque(builder, c) for c in addresses.coords0]
    for r, (chunk, guard) in enumerate(rounds(context, builder, chunks)):
        with guarded(builder, guard):
            if addresses is None:
                cc = unflatten(builder, builder.mul(chunk, I32(vec)), extents)
                coords = global_coords(builder, src, side_offsets(src, cc))
                sptr = builder.gep(dst.value, [tile_offset(builder, dst, side_offsets(dst, cc))],
                                   inbounds=True)
                gptr = global_pointer(builder, src, coords)
            else:
                delta = side_offsets(src, list(addresses.deltas[r]))
                coords = [builder.add(c, I64(k)) if k else c for c, k in zip(first, delta)]
                sptr, gptr = addresses.pointers(r)
            # a chunk starts inside the tensor when every coordinate is (unsigned: a
            # negative one is outside); it then copies what is left of its row, up to vec
            ok = None
            for c, n in zip(coords, shape):
                b = builder.icmp_unsigned("<", c, n)
                ok = b if ok is None else builder.and_(ok, b)
            left = builder.sub(shape[-1], coords[-1])
            left = builder.select(builder.icmp_signed(">", left, I64(vec)), I64(vec), left)
            left = builder.select(ok, left, I64(0))
            nbytes = builder.trunc(builder.mul(left, I64(itemsize)), I32)
            inside = builder.icmp_unsigned("!=", left, I64(0))
            data = src.data
            if gptr.type != data.type:
                data = builder.addrspacecast(data, gptr.type)
            cp_async(builder, sptr, builder.select(inside, gptr, data), vec * itemsize, nbytes)


def _copy_async_chunks(context, builder, src, dst, extents, vec, chunks, fast):
    """global → shared with cp.async: each chunk of ``vec`` elements is one async copy of
    4, 8 or 16 bytes; the bytes past the tensor's last column, or of a row outside it,
    are zero-filled by the instruction (its source size operand). When the region's
    last start is not a multiple of vec (checked once, at run time) the copy is
    synchronous, element by element."""
    itemsize = src.dtype.itemsize
    shape = src.shape
    with builder.if_else(fast, likely=True) as (then, otherwise):
        with then:
            # a tile wholly inside the tensor (every tile but the edges) skips the
            # per-chunk bounds arithmetic
            interior = region_inside(builder, src, shape)
            with builder.if_else(interior, likely=True) as (inner, edge):
                with inner:
                    addresses = _chunk_addresses(context, builder, src, dst, extents, vec)
                    for r, (chunk, guard) in enumerate(rounds(context, builder, chunks)):
                        with guarded(builder, guard):
                            if addresses is not None:
                                sptr, gptr = addresses.pointers(r)
                            else:
                                sptr, gptr, _ = _chunk_place(builder, src, dst, extents,
                                                             vec, chunk)
                            cp_async(builder, sptr, gptr, vec * itemsize, I32(vec * itemsize))
                with edge:
                    _copy_async_edge(context, builder, src, dst, extents, vec, chunks, shape,
                                     _chunk_addresses(context, builder, src, dst, extents, vec,
                                                      inside=False))
        with otherwise:
            # the synchronous copy of a misaligned start, not emitted where the start is
            # known to be aligned (LLVM deleted it there): FlashAttention 128x64 on
            # sm_80, 30,400 -> 23,400 lowered LLVM instructions, the PTX unchanged
            if not _known_aligned(src, vec):
                _copy_distributed(context, builder, _unfast(src), dst, extents)


def _chunk_place(builder, src, dst, extents, vec, chunk, inbounds=True):
    """(shared pointer, global pointer, global coordinates) of one chunk, computed from
    its index (``inbounds``: the chunk is known to be inside the tensor)."""
    cc = unflatten(builder, builder.mul(chunk, I32(vec)), extents)
    coords = global_coords(builder, src, side_offsets(src, cc))
    sptr = builder.gep(dst.value, [tile_offset(builder, dst, side_offsets(dst, cc))], inbounds=True)
    return sptr, global_pointer(builder, src, coords, inbounds), coords


def _chunk_addresses(context, builder, src, dst, extents, vec, inside=True, opaque_steps=True):
    """A ChunkAddresses for this thread's chunks of a copy between global side ``src``
    and shared side ``dst`` (either way round: cp.async, and the interior of a
    synchronous copy), or None where the layout does not decompose (see
    chunk_addresses.py). ``inside``: every
    chunk is inside the tensor (else round 0's pointer, the base of the others, may
    point outside it and is formed without ``inbounds``)."""
    if not all(isinstance(s, ir.Constant) for s in dst.starts):
        return None
    # which copy coordinate each tile dimension takes (None: fixed at its start)
    sources = side_offsets(dst, [(i,) for i in range(len(extents))])
    dst_dims = tuple((src_[0] if isinstance(src_, tuple) else None, start.constant)
                     for src_, start in zip(sources, dst.starts))
    layout = plan().tile(dst.ty.tile_name).layout
    steps = round_plan(layout, tuple(extents), vec, plan().threads, dst_dims)
    if steps is None:
        return None
    tid = thread_index(context, builder, where_used=True)
    sptr, gptr, coords = _chunk_place(builder, src, dst, extents, vec, tid, inbounds=inside)

    def byte_step(delta):
        offset = element_offset(builder, src, [I64(k) for k in side_offsets(src, list(delta))])
        return builder.mul(offset, I64(src.dtype.itemsize))

    return ChunkAddresses(builder, steps, sptr, gptr, coords, byte_step, opaque_steps, inside)


def _unfast(side):
    """The same operand, never taking the vector path (the element-wise fallback)."""
    import dataclasses
    return dataclasses.replace(side, scalar_only=True)


def operands(context, builder, arg_types, args):
    """(source, destination, the copy's extents) of a copy-like operation."""
    src = describe(context, builder, arg_types[0], args[0])
    dst = describe(context, builder, arg_types[1], args[1])
    try:
        (src.ranged, src.extents), (dst.ranged, dst.extents), extents = copy_dims(
            (src.ndim, src.ranged, src.extents), (dst.ndim, dst.ranged, dst.extents))
    except RegionError as e:
        # `T.copy(f, B[0:1, :])` with a (64,) fragment: a slice of one element is the
        # point it names, as an index is (`B[0, :]`)
        for side in (src, dst):
            if side.unit_dims:
                side.ranged = [d for d in side.ranged if d not in side.unit_dims] or None
        try:
            (src.ranged, src.extents), (dst.ranged, dst.extents), extents = copy_dims(
                (src.ndim, src.ranged, src.extents), (dst.ndim, dst.ranged, dst.extents))
        except RegionError:
            if not (src.extents and dst.extents and tile_governs(
                    src.kind != "global", src.extents, dst.kind != "global", dst.extents)):
                raise CompileError(str(e)) from None
            # TileLang's copy over the tile's extents from the region's start
            region = src if src.kind == "global" else dst
            region.extents = None
            (src.ranged, src.extents), (dst.ranged, dst.extents), extents = copy_dims(
                (src.ndim, src.ranged, src.extents), (dst.ndim, dst.ranged, dst.extents))
    for side in (src, dst):
        _check_tile_bounds(side)
    return src, dst, extents


def _check_tile_bounds(side: Side) -> None:
    """A tile's region whose compile-time start and extent run past the tile (``S[8,
    0:32]`` of an 8-row tile): a CompileError, as the simulator's IndexError. A global
    tensor's region is guarded element by element instead (safe memory access); a
    tile's is not, so the copy would read or write past it."""
    starts = side.static_starts
    if side.kind == "global" or starts is None:
        return
    ranged = list(side.ranged or [])
    extents = list(side.extents or ())
    for d, n in enumerate(side.ty.shape):
        s = starts[d] if d < len(starts) else None
        if s is None:
            continue
        k = ranged.index(d) if d in ranged else None
        e = extents[k] if k is not None and k < len(extents) else 1
        if s < 0 or s + e > n:
            raise CompileError(
                f"T.copy: the region of {side.kind} tile {side.ty.tile_name!r} (shape "
                f"{tuple(side.ty.shape)}) runs past it: dimension {d} from {s} to "
                f"{s + e - 1}, where the tile ends at {n - 1}")


@lower(T.copy, types.Any, types.Any)
def copy_impl(context, builder, sig, args):
    src, dst, extents = operands(context, builder, sig.args, args)
    kinds = {src.kind, dst.kind}
    if "fragment" in kinds:
        if kinds == {"fragment"} and plan().tile(src.ty.tile_name).indexing is not \
                plan().tile(dst.ty.tile_name).indexing:
            raise CompileError("T.copy between fragments with different layouts")
        if "local" in kinds:
            raise CompileError("T.copy between a fragment and a local tile is not supported")
        _copy_by_fragment(context, builder, src, dst, extents)
    elif "local" in kinds:
        _copy_serial(context, builder, src, dst, extents)
    else:
        _copy_distributed(context, builder, src, dst, extents)
    return context.get_dummy_value()


@lower(markers.stub(markers.COPY_ASYNC), types.Any, types.Any)
def copy_async_impl(context, builder, sig, args):
    """A producer of a software pipeline: ``cp.async`` where it can, else as T.copy."""
    return emit_copy_async(context, builder, sig.args, args)


def emit_copy_async(context, builder, arg_types, args):
    """``copy_async_impl`` of the (source, destination) types and values; also called by
    a gemm that issues a pipelined loop's refill (lowering/gemm.py)."""
    src, dst, extents = operands(context, builder, arg_types, args)
    if src.kind == "global" and dst.kind == "shared" and current_kernel().target.has_cp_async:
        _copy_distributed(context, builder, src, dst, extents, asynchronous=True)
    else:
        _copy_distributed(context, builder, src, dst, extents)
    return context.get_dummy_value()


@lower(markers.stub(markers.COMMIT))
def cp_commit_impl(context, builder, sig, args):
    # without cp.async (before sm_80) the pipeline's copies were synchronous: no groups
    if current_kernel().target.has_cp_async:
        builder.call(intrinsic(builder, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), []),
                     [])
    return context.get_dummy_value()


@lower(markers.stub(markers.WAIT), types.IntegerLiteral)
def cp_wait_impl(context, builder, sig, args):
    if current_kernel().target.has_cp_async:
        fn = intrinsic(builder, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
        builder.call(fn, [I32(sig.args[0].literal_value)])
    return context.get_dummy_value()


# -- T.fill / T.clear of global memory -----------------------------------------------------

def _fill_global(context, builder, ty, arg, value_ty, value):
    """Every element of a global tensor (or of a region of one, or of a region of a
    shared tile: ``T.fill(S[0], 0)``) := value, the elements dealt round-robin to the
    block's threads; a region's edge past the tensor is skipped (as the simulator's
    ``fill`` does)."""
    side = describe(context, builder, ty, arg)
    if side.kind not in ("global", "shared"):
        raise CompileError(f"T.fill of a region of a {side.kind} tile is not supported: "
                           f"pass the whole tile")
    if isinstance(ty, RegionType) and not side.ranged:
        side.extents, side.ranged = (), []      # one element: T.fill(S[i], v)
    v = context.cast(builder, value, value_ty, side.element)
    if isinstance(ty, RegionType) and side.extents is None:
        if side.kind != "global":
            raise CompileError("T.fill: the region's extent is unknown; slice it (as "
                               "S[r, 0:n] with n known at compile time)")
        return _fill_dynamic_region(context, builder, side, v)
    tid = builder.zext(thread_index(context, builder), I64)
    threads = I64(plan().threads)
    if side.extents is not None:                # a region of compile-time extents
        wide = [n for n in side.extents if n != 1]
        total = I64(math.prod(wide))
    else:                                       # the whole tensor, of its run-time shape
        shape = side.shape
        total = I64(1)
        for n in shape:
            total = builder.mul(total, n)
    with cgutils.for_range_slice(builder, tid, total, threads, inc=True) as (flat, _):
        if side.extents is not None and side.kind == "shared":
            # a region of a shared tile: what lies past the tile is skipped, as the
            # global edge is (the simulator reports it)
            coords = unflatten(builder, builder.trunc(flat, I32), wide)
            offsets = side_offsets(side, coords)
            with builder.if_then(inside_tile(builder, side, offsets)):
                store_element(context, builder, side, offsets, v)
        elif side.extents is not None:          # i32 copy coordinates, bounds-checked
            coords = unflatten(builder, builder.trunc(flat, I32), wide)
            store_element(context, builder, side, side_offsets(side, coords), v)
        else:                                   # i64 coordinates inside the tensor
            coords = unflatten(builder, flat, shape)
            context.pack_value(builder, side.element, v,
                               global_pointer(builder, side, coords),
                               align=side.dtype.itemsize)
    return context.get_dummy_value()


def _fill_dynamic_region(context, builder, side, v):
    """A region of a global tensor whose extents are known at run time
    (``T.fill(x[a:b], 0)``, TileLang's issue 1008): each sliced dimension from its start
    to its end (the tensor's end where the slice names none, nothing where the end is
    before the start), clamped to the tensor, the elements dealt round-robin to the
    block's threads."""
    zero = I64(0)
    extents, starts = [], list(side.starts)
    stops = side.stops()
    for d in side.ranged or []:
        # the part inside the tensor: [max(start, 0), min(stop, shape)), empty if reversed
        lo = builder.select(builder.icmp_signed("<", starts[d], zero), zero, starts[d])
        hi = builder.select(builder.icmp_signed("<", stops[d], side.shape[d]), stops[d],
                            side.shape[d])
        n = builder.sub(hi, lo)
        starts[d] = lo
        extents.append(builder.select(builder.icmp_signed("<", n, zero), zero, n))
    total = I64(1)
    for n in extents:
        total = builder.mul(total, n)
    tid = builder.zext(thread_index(context, builder), I64)
    with cgutils.for_range_slice(builder, tid, total, I64(plan().threads), inc=True) as (
            flat, _):
        coords = list(starts)
        for d, c in zip(side.ranged or [], unflatten(builder, flat, extents)):
            coords[d] = builder.add(starts[d], c)
        inside = inside_tensor(builder, side, coords)
        with builder.if_then(inside):
            context.pack_value(builder, side.element, v, global_pointer(builder, side, coords),
                               align=side.dtype.itemsize)
    return context.get_dummy_value()


@lower(T.fill, GlobalTensorType, types.Any)
@lower(T.fill, RegionType, types.Any)
def fill_global_impl(context, builder, sig, args):
    return _fill_global(context, builder, sig.args[0], args[0], sig.args[1], args[1])


@lower(T.clear, GlobalTensorType)
@lower(T.clear, RegionType)
def clear_global_impl(context, builder, sig, args):
    return _fill_global(context, builder, sig.args[0], args[0], types.int32, I32(0))

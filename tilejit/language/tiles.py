"""Tiles: allocation, ``T.copy``, ``T.clear``/``T.fill`` and ``T.gemm``.

The bodies below are the simulation semantics (numpy, one block at a time; a tile is a
``SimTensor`` holding the whole tile). On a GPU the compiler replaces each call: see
``passes/tile_allocation.py`` and ``lowering/tiles.py``, ``copy.py``, ``gemm.py``.
"""
from __future__ import annotations

import enum

import numpy as np

from tilejit.language import numerics as _num
from tilejit.language.dtypes import as_dtype, bfloat16


class GemmWarpPolicy(str, enum.Enum):
    """How ``T.gemm`` spreads the block's warps over the output tile: ``FullRow`` puts
    them all along M, ``FullCol`` along N, ``Square`` balances the two."""
    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"


def _new_tile(shape, dtype, kind):
    from tilejit.sim.runtime import SimTensor
    dtype = as_dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    storage = np.float32 if dtype == bfloat16 else dtype.numpy
    return SimTensor(np.zeros(shape, dtype=storage), dtype, f"{kind} tile")


def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in the block's shared memory (one per block, seen by all its threads)."""
    return _new_tile(shape, dtype, "shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A block-level tile spread over the threads' registers; the compiler picks which
    thread holds which element (index it inside a ``T.Parallel`` over its shape)."""
    return _new_tile(shape, dtype, "fragment")


def alloc_local(shape, dtype, scope="local"):
    """Each thread's own small array."""
    return _new_tile(shape, dtype, "local")


def alloc_var(dtype, init=0):
    """Each thread's own scalar, initialised to ``init``."""
    return _num.cast(init, as_dtype(dtype))


def Pipelined(n, num_stages=0, order=None, stage=None, group=None, sync=None):  # noqa: N802
    """``for k in T.Pipelined(n, num_stages=s):`` a loop whose shared-memory copies for
    later iterations may overlap this iteration's compute. Same results as ``range(n)``."""
    return range(int(n))


def annotate_layout(layouts):
    """``T.annotate_layout({tile: layout})``: give shared tiles a layout of your choice."""


def use_swizzle(panel_size=10, order="row", enable=True):
    """Block rasterization for L2 reuse (a scheduling hint: results never change)."""


class Region:
    """``A[r0:r1, c]`` (or ``A[r0, c0]``) used as a tile operation's operand."""

    def __init__(self, tensor, kinds, starts, ends):
        self.tensor, self.kinds = tensor, kinds
        self.starts = tuple(int(s) for s in starts)
        self.ends = tuple(None if e is None else int(e) for e in ends)

    @property
    def dtype(self):
        return self.tensor.dtype


def region(tensor, kinds, starts, ends, extents=""):
    return Region(tensor, kinds, starts, ends)


def _operand(x):
    """(tensor, starts, ranged dims, known extents or None) of a tile operand."""
    if isinstance(x, Region):
        ranged = [d for d, k in enumerate(x.kinds) if k == "s"]
        extents = None
        if ranged and all(x.ends[d] is not None for d in ranged):
            extents = tuple(x.ends[d] - x.starts[d] for d in ranged)
        return x.tensor, list(x.starts), ranged or None, extents
    shape = tuple(x.shape)
    return x, [0] * len(shape), list(range(len(shape))), shape


def _match(extents, ranged, ndim, other_extents, what):
    """The ranged dims of an operand whose extent comes from the other operand."""
    if ranged is None:                          # A[r0, c0]: the last dims, starting there
        k = len(other_extents)
        if k > ndim:
            raise ValueError(f"{what}: a {ndim}-d region cannot hold a {other_extents} tile")
        return list(range(ndim - k, ndim)), tuple(other_extents)
    if extents is None:
        squeezed = [e for e in other_extents if e != 1] if len(other_extents) != len(ranged) \
            else list(other_extents)
        if len(squeezed) != len(ranged):
            raise ValueError(f"{what}: the region has {len(ranged)} sliced dimension(s), "
                             f"the other operand's shape is {tuple(other_extents)}")
        return ranged, tuple(squeezed)
    return ranged, extents


def _resolve(src, dst, what):
    s_t, s_start, s_ranged, s_ext = _operand(src)
    d_t, d_start, d_ranged, d_ext = _operand(dst)
    if s_ext is None and d_ext is None:
        raise ValueError(f"{what}: neither operand says the extent of the copy")
    if s_ext is None:
        s_ranged, s_ext = _match(None, s_ranged, len(s_t.shape), d_ext, what)
    if d_ext is None:
        d_ranged, d_ext = _match(None, d_ranged, len(d_t.shape), s_ext, what)
    if [e for e in s_ext if e != 1] != [e for e in d_ext if e != 1]:
        raise ValueError(f"{what}: source extent {tuple(s_ext)} and destination extent "
                         f"{tuple(d_ext)} differ")
    return (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext)


def _block_index(start, ranged, extents, shape):
    """Index arrays over the region (ranged dims in order), and which elements are
    inside the tensor."""
    grids = np.indices(tuple(extents), dtype=np.int64)
    idx, inside = [], np.ones(tuple(extents), dtype=bool)
    r = 0
    for d, n in enumerate(shape):
        if d in ranged:
            i = start[d] + grids[r]
            r += 1
        else:
            i = np.full(tuple(extents), start[d], dtype=np.int64)
        inside &= (i >= 0) & (i < n)
        idx.append(i)
    return idx, inside


def copy(src, dst):
    """Copy a tile or region into another, converting dtype. Elements of a global region
    outside the tensor are never read (the destination gets 0) and never written."""
    from tilejit.sim.runtime import _to_storage
    (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext) = _resolve(
        src, dst, "T.copy")
    s_idx, s_in = _block_index(s_start, s_ranged, s_ext, s_t.shape)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    s_data = s_t.data
    safe = tuple(np.where(s_in, i, 0) for i in s_idx)
    values = np.where(s_in, s_data[safe], s_data.dtype.type(0)).reshape(-1)
    d_flat = [i.reshape(-1) for i in d_idx]
    keep = d_in.reshape(-1)
    stored = _to_storage(_num.cast(values, d_t.dtype) if d_t.dtype != bfloat16 else values,
                         d_t.dtype, d_t.data.dtype)
    d_t.data[tuple(i[keep] for i in d_flat)] = np.asarray(stored).reshape(-1)[keep]


def fill(buf, value):
    """Set every element of a tile (or region) to ``value``."""
    from tilejit.sim.runtime import _to_storage
    t, start, ranged, ext = _operand(buf)
    if ext is None:
        raise ValueError("T.fill: the region's extent is unknown; slice it")
    idx, inside = _block_index(start, ranged, ext, t.shape)
    t.data[tuple(i[inside] for i in idx)] = _to_storage(value, t.dtype, t.data.dtype)


def clear(buf):
    """Set every element of a tile to 0."""
    fill(buf, 0)


def _tf32(x):
    """Round float32 to TensorFloat-32 (10 mantissa bits, to nearest, ties away)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    finite = np.isfinite(np.asarray(x, dtype=np.float32))
    return np.where(finite, rounded, bits).view(np.float32)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0):
    """``C += op(A) @ op(B)`` with the products accumulated in C's dtype (float32
    inputs are rounded to TensorFloat-32 first, as the tensor cores do)."""
    from tilejit.sim.runtime import _to_storage
    a = A.data.T if transpose_A else A.data
    b = B.data.T if transpose_B else B.data
    acc = C.dtype
    if clear_accum:
        C.data[...] = 0
    if acc.is_int:
        total = C.data.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)
        C.data[...] = total.astype(np.int32)
        return
    if A.dtype.name == "float32":
        a, b = _tf32(a), _tf32(b)
    a, b = a.astype(np.float32), b.astype(np.float32)
    if acc.name == "float16":
        # the tensor cores round the float16 accumulator after every k-step of 16
        total = C.data.astype(np.float32)
        for k in range(0, a.shape[1], 16):
            total = (total + a[:, k:k + 16] @ b[k:k + 16]).astype(np.float16).astype(np.float32)
    else:
        total = C.data.astype(np.float32) + a @ b
    C.data[...] = _to_storage(total, acc, C.data.dtype)

"""What the language's operations mean when the simulator runs them: numpy on whole
tiles, one block at a time (``runner.py``), under the lane mask of ``runtime.py``.

``tilejit/language`` declares each of these names (``T.copy``, ``T.gemm``, ``T.exp``, …)
as a function with its signature and documentation whose body asks
``language/_semantics.py`` for its meaning; ``MEANINGS`` below is what this package
installs there (``sim/__init__.py``). The compiler never runs these bodies: its passes
recognise the ``T.*`` objects themselves and its typing and lowering are keyed on them.

A tile is a ``SimTensor`` holding the whole tile, named by the variable its allocation
is assigned to, which knows which elements have been written: each operation checks
what it reads (``check_written``: the elements of a ``T.copy`` source that land in the
destination, ``T.gemm``'s A and B and its C unless ``clear_accum``, a reduction's source
and, with ``clear=False``, its destination, an atomic's destination) and records what it
writes (``wrote``). A region operand (``A[r0:r1, c]``)
arrives as a ``Region`` (the front end's region rewrite, ``__tj_region``); element
atomics arrive as ``__tj_atomic_*`` calls bound to ``SIM_ELEMENT``.
"""
from __future__ import annotations

import linecache
import math as _math_module
import sys

import numpy as np

from tilejit.errors import AssumptionError, CompileError
from tilejit.frontend.gemm_operands import GemmOperand, form_error, region_errors, shape_error
from tilejit.language import numerics as _num
from tilejit.language.atomics import (DTYPES, OPS, element_dtype_error,
                                      memory_order_error)
from tilejit.language.dtypes import as_dtype
from tilejit.language.fragment_layout import Fragment as UserFragment
from tilejit.language.layout import Layout as UserLayout
from tilejit.language.minmax import FMAX, FMIN, MAXIMUM, MINIMUM
from tilejit.language.tiles import BLOCK_WIDE, GemmWarpPolicy, check_max_nreg
from tilejit.sim.runtime import (STATE, SimTensor, _caller_location, _to_storage,
                                 assigned_name, lay_out_global, kernel_frame, shared_object)
from tilejit.sim import garbage, views
from tilejit.sim.block_races import block_id
from tilejit.sim.races import one_to_one, repeats
from tilejit.ir.regions import tile_governs
from tilejit.sim.threads import (LaneTensor, ThreadCodeError, _active, block_wide, uniform,
                                 varies)


# -- tiles ----------------------------------------------------------------------------

def _new_tile(shape, dtype, kind):
    dtype = as_dtype(dtype).in_tiles
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    storage = dtype.numpy
    frame = kernel_frame()
    name = (assigned_name(frame) if frame is not None else None) or f"{kind} tile"
    if kind == "shared":        # one per block, whichever warpgroup role allocates it
        return shared_object(lambda: SimTensor(garbage.fill(shape, storage), dtype, name,
                                               kind), f"{name}: {dtype.name}{list(shape)}")
    if kind == "local" and STATE.lanes:     # per-thread code: each thread's own copy
        return LaneTensor(shape, storage, dtype, name)
    return SimTensor(garbage.fill(shape, storage), dtype, name, kind)


def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in the block's shared memory (one per block, seen by all its threads)."""
    return _new_tile(shape, dtype, "shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A block-level tile spread over the threads' registers; the compiler picks which
    thread holds which element (index it inside a ``T.Parallel`` over its shape)."""
    return _new_tile(shape, dtype, "fragment")


def own_fragment(shape, dtype):
    """A fragment of per-thread code used only element by element outside T.Parallel
    loops (``transform._own_fragments``): each thread's own, as the compiler gives every
    thread all of it (``passes/whole_fragments.py``, TileLang's floating fragments)."""
    return _new_tile(shape, dtype, "local")


def alloc_local(shape, dtype, scope="local"):
    """Each thread's own small array."""
    return _new_tile(shape, dtype, "local")


def alloc_var(dtype, init=0):
    """Each thread's own scalar, initialised to ``init``."""
    return _num.cast(init, as_dtype(dtype))


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
    if STATE.lanes:     # per-thread code: a region is the block's, one for all threads
        if any(varies(b) for b in (*starts, *ends) if b is not None):
            return LaneRegion(tensor, kinds, starts, ends)     # unless a thread's own copy
        starts = tuple(uniform(s, "a tile operation's region start") for s in starts)
        ends = tuple(e if e is None else uniform(e, "a tile operation's region end")
                     for e in ends)
    return Region(tensor, kinds, starts, ends)


class LaneRegion:
    """A region whose bounds differ between the threads of per-thread code
    (``T.copy(A[tm, tn * 8:(tn + 1) * 8], local)``): a ``T.copy`` to or from a thread's
    own tile takes it lane by lane (``_own_copy``); any other use is the error a region
    of the block's must be the same in every thread."""

    def __init__(self, tensor, kinds, starts, ends):
        self.tensor, self.kinds, self.starts, self.ends = tensor, kinds, starts, ends

    def at(self, lane) -> Region:
        def pick(b):
            return b if b is None or np.ndim(b) == 0 else np.asarray(b).reshape(-1)[lane]
        return Region(self.tensor, self.kinds, [pick(b) for b in self.starts],
                      [pick(b) for b in self.ends])

    def refuse(self):
        uniform(next(b for b in (*self.starts, *self.ends) if varies(b)),
                "a tile operation's region start")


def _own(x) -> bool:
    """Whether a copy's operand is a thread's own tile (a T.alloc_local of per-thread
    code), whole or a region of it."""
    return isinstance(getattr(x, "tensor", x), LaneTensor)


def _own_copy(src, dst):
    """``T.copy`` with a thread's own tile on one side, in per-thread code: each active
    thread copies its own region (whose bounds may depend on its index) into or out of
    its own tile, as the compiler's loop in each thread does."""
    for x in (src, dst):
        t = getattr(x, "tensor", x)
        if isinstance(t, LaneTensor) or getattr(t, "kind", None) is None:
            continue
        if x is src and t.kind == "shared":
            continue                            # each thread reads its region
        raise ThreadCodeError(
            f"T.copy between {getattr(src, 'tensor', src).name} and "
            f"{getattr(dst, 'tensor', dst).name} in per-thread code: {t.name} is a {t.kind} "
            f"tile and the other a thread's own T.alloc_local tile; each thread copying its "
            f"own region into a tile of the block's is not supported in simulation (write "
            f"the elements one by one){_caller_location(3)}")
    active = _active()
    for lane in range(STATE.lanes):
        if active is None or active[lane]:
            copy(_at_lane(src, lane), _at_lane(dst, lane))


def _at_lane(x, lane):
    if isinstance(x, LaneRegion):
        x = x.at(lane)
    t = getattr(x, "tensor", x)
    if not isinstance(t, LaneTensor):
        return x
    own = _TileView.__new__(_TileView)
    own.data, own.dtype, own.name, own.kind = t.data[lane], t.dtype, t.name, "local"
    own.unwritten = None if t.unwritten is None else t.unwritten[lane]
    own.races, own.iterations = None, None
    return Region(own, x.kinds, x.starts, x.ends) if isinstance(x, Region) else own


class _TileView(SimTensor):
    """Some elements of a tile, seen in place (a stage ``A_s[k % 2, :, :]`` of a
    multi-buffered tile); what it writes is written in the tile."""

    __slots__ = ()

    def wrote(self, idx=None):
        if self.races is not None:
            self.races.write(idx)
        if self.unwritten is not None:
            self.unwritten[... if idx is None else idx] = False


def tile_view(x, what):
    """A tile operand that may be a region of a tile (``T.gemm(A_s[k % 2, :, :], …)``):
    a tile, or a ``_TileView`` of the region's elements."""
    if isinstance(x, LaneRegion):
        x.refuse()
    if not isinstance(x, Region):
        return x
    t = x.tensor
    index = []
    for d, n in enumerate(t.shape):
        kind = x.kinds[d] if d < len(x.kinds) else "s"
        start = x.starts[d] if d < len(x.starts) else 0
        end = x.ends[d] if d < len(x.ends) else None
        stop = start + 1 if kind == "p" else (n if end is None else end)
        if not 0 <= start < stop <= n:
            raise IndexError(f"{what}: {t.name}[{start}:{stop}] along dimension {d} is out of "
                             f"bounds for shape {tuple(t.shape)}{_caller_location(2)}")
        index.append(start if kind == "p" else slice(start, stop))
    index = tuple(index)
    view = _TileView.__new__(_TileView)
    view.data, view.dtype, view.name, view.kind = t.data[index], t.dtype, t.name, t.kind
    view.unwritten = None if t.unwritten is None else t.unwritten[index]
    view.races = None if t.races is None else t.races.view(index)
    view.iterations = None      # a region operand: read or written whole, not per iteration
    return view


def _operand(x):
    """(tensor, starts, ranged dims, known extents or None) of a tile operand."""
    if isinstance(x, LaneRegion):
        x.refuse()
    if isinstance(x, Region):
        ranged = [d for d, k in enumerate(x.kinds) if k == "s"]
        extents = None
        ends = list(x.ends)
        if getattr(x.tensor, "kind", None) is not None:
            # `S[:, k:]` of a tile (as the compiler's typing): to the tile's end
            ends = [x.tensor.shape[d] if e is None and d in ranged else e
                    for d, e in enumerate(ends)]
        if ranged and all(ends[d] is not None for d in ranged):
            extents = tuple(ends[d] - x.starts[d] for d in ranged)
        else:       # the extent from the other operand: `B[0:1, :]` is the point `B[0, :]`
            ranged = [d for d in ranged if ends[d] is None or ends[d] - x.starts[d] != 1]
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


def _to_tensor_end(x, ranged):
    """The extents of a region of a global tensor whose open slices run to its edge."""
    if not isinstance(x, Region) or ranged is None or getattr(x.tensor, "kind", 1) is not None:
        return None
    return tuple((x.tensor.shape[d] if x.ends[d] is None else x.ends[d]) - x.starts[d]
                 for d in ranged)


def _resolve(src, dst, what):
    s_t, s_start, s_ranged, s_ext = _operand(src)
    d_t, d_start, d_ranged, d_ext = _operand(dst)
    if s_ranged is None and d_ranged is None and s_ext is None and d_ext is None and \
            len(s_start) == len(s_t.shape) and len(d_start) == len(d_t.shape):
        # T.copy(A[i, j], B[k, l]): one element (as the compiler copies it)
        return (s_t, s_start, [], ()), (d_t, d_start, [], ())
    if s_ext is None and d_ext is None:
        # two regions of tensors: a slice to the end (`G[r0:r1, :]`) runs to the tensor's
        # edge, as the compiler reads it from the compile-time shape
        s_ext = _to_tensor_end(src, s_ranged)
    if s_ext is None and d_ext is None:
        raise ValueError(f"{what}: neither operand says the extent of the copy")
    if s_ext is None:
        s_ranged, s_ext = _match(None, s_ranged, len(s_t.shape), d_ext, what)
    if d_ext is None:
        d_ranged, d_ext = _match(None, d_ranged, len(d_t.shape), s_ext, what)
    if [e for e in s_ext if e != 1] != [e for e in d_ext if e != 1]:
        s_tile, d_tile = (getattr(t, "kind", None) is not None for t in (s_t, d_t))
        if what != "T.copy" or not tile_governs(s_tile, s_ext, d_tile, d_ext):
            raise ValueError(f"{what}: source extent {tuple(s_ext)} and destination extent "
                             f"{tuple(d_ext)} differ")
        # TileLang's copy over the tile's extents from the region's start (ir/regions.py)
        if s_tile:
            d_ranged, d_ext = _match(None, d_ranged, len(d_t.shape), s_ext, what)
        else:
            s_ranged, s_ext = _match(None, s_ranged, len(s_t.shape), d_ext, what)
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
    outside the tensor are never read (the destination gets 0, or the tensor's
    ``T.annotate_safe_value``) and never written."""
    (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext) = _resolve(
        src, dst, "T.copy")
    if _basic_copy(s_t, s_start, s_ranged, s_ext, d_t, d_start, d_ranged, d_ext):
        return
    s_idx, s_in = _block_index(s_start, s_ranged, s_ext, s_t.shape)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    for t, idx, inside in ((s_t, s_idx, s_in), (d_t, d_idx, d_in)):
        if getattr(t, "kind", None) is not None and not inside.all():
            # a tile is not guarded as a global tensor is: on the GPU the copy reads or
            # writes past it (whatever shared memory or registers lie there)
            pos = tuple(np.argwhere(~inside)[0])
            first = ", ".join(str(int(i[pos])) for i in idx)
            raise IndexError(f"T.copy: {t.name}[{first}] is out of bounds for shape "
                             f"{tuple(t.shape)} (a {t.kind} tile){_caller_location(3)}")
    _move(s_t, s_idx, s_in, d_t, d_idx, d_in)


def _basic_key(start, ranged, extents, shape):
    """The region as a tuple of slices and ints (numpy's basic indexing: a view, no index
    arrays), or None where it is not wholly inside the tensor, a start is not one int or
    an extent is below 0 (a run-time end before its start, ``A[n:m]``: a slice would be
    empty, the general path's answer is its own)."""
    key, r = [], 0
    for d, n in enumerate(shape):
        s = start[d]
        if not isinstance(s, (int, np.integer)):
            return None
        if d in ranged:
            e = extents[r]
            r += 1
            if e < 0 or s < 0 or s + e > n:
                return None
            key.append(slice(int(s), int(s) + e))
        else:
            if not 0 <= s < n:
                return None
            key.append(int(s))
    return tuple(key)


def _basic_copy(s_t, s_start, s_ranged, s_ext, d_t, d_start, d_ranged, d_ext) -> bool:
    """``_move``'s result for a copy of two regions wholly inside their tensors, read and
    written as views (the simulator's most frequent operation: a tile copy of every
    block's every step), where no record needs each element's own index: False (nothing
    done) for a tile of per-thread lanes or a view, a shared tile under warp-role race
    checks or overlaid in another dtype, an element of the source not yet written (the
    general path reports it), and under a buffer's print."""
    if type(s_t) is not SimTensor or type(d_t) is not SimTensor or STATE.peeking or \
            s_t.races is not None or d_t.races is not None or d_t.overlaid or \
            d_t.stale is not None or s_t.stale is not None:
        return False
    s_key = _basic_key(s_start, s_ranged, s_ext, s_t.shape)
    d_key = _basic_key(d_start, d_ranged, d_ext, d_t.shape) if s_key is not None else None
    if d_key is None:
        return False
    if s_t.unwritten is not None and s_t.unwritten[s_key].any():
        return False
    s_t.check_written(s_key)            # (the block-race record takes a basic key too)
    values = s_t.data[s_key]
    if not d_t.dtype.held_in_float32:
        values = _num.cast(values, d_t.dtype)
    d_view = d_t.data[d_key]
    d_t.data[d_key] = np.asarray(_to_storage(values, d_t.dtype, d_t.data.dtype)).reshape(
        np.shape(d_view))
    d_t.wrote(d_key)
    return True


def _move(s_t, s_idx, s_in, d_t, d_idx, d_in):
    """``d_t`` at ``d_idx`` (index arrays, which are inside it: ``d_in``) gets ``s_t`` at
    ``s_idx`` (``s_in``) element by element in dtype ``d_t``'s: an element outside the
    source reads as 0 (or its ``T.annotate_safe_value``), one outside the destination is
    not written."""
    s_data = s_t.data
    safe = tuple(np.where(s_in, i, 0) for i in s_idx)
    keep = d_in.reshape(-1)
    if s_t.unwritten is not None:     # read: the source elements that land in dst
        s_t.check_written(tuple(i.reshape(-1) for i in safe), s_in.reshape(-1) & keep)
    def stored_as_dst(v):
        return _to_storage(v if d_t.dtype.held_in_float32 else _num.cast(v, d_t.dtype),
                           d_t.dtype, d_t.data.dtype)
    values = np.where(s_in, s_data[safe], s_data.dtype.type(0)).reshape(-1)
    d_flat = [i.reshape(-1) for i in d_idx]
    stored = stored_as_dst(values)
    pad = getattr(s_t, "safe_value", None) if getattr(s_t, "kind", 0) is None else None
    if pad is not None:     # T.annotate_safe_value: the value in dst's dtype, as TileLang pads
        stored = np.where(s_in.reshape(-1), stored, stored_as_dst(np.asarray(pad, np.float64)))
    written = tuple(i[keep] for i in d_flat)
    d_t.data[written] = np.asarray(stored).reshape(-1)[keep]
    d_t.wrote(written)
    if STATE.peeking and s_t.unwritten is not None:
        # a fragment copied for its print: what nothing wrote stays marked so
        bad = (s_t.unwritten[tuple(i.reshape(-1) for i in safe)] & s_in.reshape(-1))[keep]
        if bad.any():
            if d_t.unwritten is None:
                d_t.unwritten = np.zeros(d_t.data.shape, dtype=bool)
            d_t.unwritten[tuple(i[bad] for i in written)] = True


def transpose(src, dst):
    """``dst[..., j, i] = src[..., i, j]``: tiles, tensors or regions of either, of two or
    more dimensions, ``dst``'s extents ``src``'s with the last two swapped; as ``T.copy``,
    converting dtype, a tensor's elements outside it never read (0) nor written."""
    ops = []
    for x, what in ((src, "src"), (dst, "dst")):
        t, start, ranged, ext = _operand(x)
        if ext is None:
            ext = _to_tensor_end(x, ranged)
        if ranged is None or ext is None or len(ranged) < 2:
            raise ValueError(f"T.transpose: {what} must be a tile, a tensor or a region of "
                             f"two or more sliced dimensions of known extents, got "
                             f"{getattr(t, 'name', t)!r}{_caller_location(2)}")
        ops.append((t, start, ranged, tuple(ext)))
    (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext) = ops
    want = s_ext[:-2] + (s_ext[-1], s_ext[-2])
    if d_ext != want:
        raise ValueError(f"T.transpose: dst {d_t.name!r} has extents {d_ext}; src's {s_ext} "
                         f"with the last two swapped are {want}{_caller_location(2)}")
    s_idx, s_in = _block_index(s_start, s_ranged, s_ext, s_t.shape)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    d_idx = [np.swapaxes(i, -1, -2) for i in d_idx]     # in src's order of elements
    _move(s_t, s_idx, s_in, d_t, d_idx, np.swapaxes(d_in, -1, -2))


def fill(buf, value):
    """Set every element of a tile (or region) to ``value``."""
    if isinstance(buf, LaneTensor):     # each thread's own copy, under the thread mask
        buf.fill(value, lambda v: _to_storage(v, buf.dtype, buf.data.dtype))
        return
    if STATE.lanes:
        block_wide("fill", (buf,))
        # the block's fill spreads its elements over the threads, each storing its own
        # value: one value for all of them, or the result is the compiler's layout's
        value = uniform(value, "T.fill's value")
    t, start, ranged, ext = _operand(buf)
    if ranged is None:                  # one element, T.fill(S[i], v)
        ranged, ext = [], ()
    if getattr(t, "kind", None) is None and isinstance(buf, Region):
        # a region of a tensor (its ends perhaps known only at run time): the part of
        # [start, end) inside the tensor, the end the tensor's where the slice names
        # none; nothing where the end is before the start
        ends = list(buf.ends)
        start = list(start)
        out = []
        for d in ranged:
            end = t.shape[d] if ends[d] is None else min(int(ends[d]), t.shape[d])
            start[d] = max(int(start[d]), 0)
            out.append(max(0, end - start[d]))
        ext = tuple(out)
    if ext is None:
        raise ValueError("T.fill: the region's extent is unknown; slice it")
    idx, inside = _block_index(start, ranged, ext, t.shape)
    if getattr(t, "kind", None) == "shared" and not inside.all():
        # the GPU skips these (as a tensor's edge) but a region of a tile is the
        # kernel's own arithmetic: a region past its tile is a mistake
        raise IndexError(f"T.fill: the region of shared tile {t.name} starting at "
                         f"{tuple(int(x) for x in start)} runs past its shape "
                         f"{tuple(t.shape)}{_caller_location(2)}")
    written = tuple(i[inside] for i in idx)
    t.data[written] = _to_storage(value, t.dtype, t.data.dtype)
    t.wrote(written)


def clear(buf):
    """Set every element of a tile to 0."""
    fill(buf, 0)


def _elements(buf, what):
    """The elements of a tile, a tensor or a region of one (a region's ``:`` runs to the
    tensor's end), as one flat array."""
    t, start, ranged, ext = _operand(buf)
    if ext is None:
        ends = getattr(buf, "ends", None)
        ext = tuple((t.shape[d] if ends is None or ends[d] is None else ends[d]) - start[d]
                    for d in ranged)
    if hasattr(t, "check_written"):
        t.check_written()
    idx, inside = _block_index(start, ranged, ext, t.shape)
    if not inside.all():
        raise IndexError(f"{what}: the region runs past the tensor's shape {tuple(t.shape)}")
    return np.asarray(t.data)[tuple(idx)].ravel()


def any_of(buf):
    """Whether any element is nonzero."""
    return bool(np.any(_elements(buf, "T.any_of") != 0))


def all_of(buf):
    """Whether every element is nonzero."""
    return bool(np.all(_elements(buf, "T.all_of") != 0))


def _tf32(x):
    """Round float32 to TensorFloat-32 (10 mantissa bits, to nearest, ties away)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    finite = np.isfinite(np.asarray(x, dtype=np.float32))
    return np.where(finite, rounded, bits).view(np.float32)


def _gemm_operand(role, x):
    """The operand as ``frontend/gemm_operands.py`` checks it (raises its message)."""
    if not isinstance(x, Region):
        return GemmOperand(role, x.name, getattr(x, "kind", "global"), tuple(x.data.shape))
    t = x.tensor
    shape = tuple(t.data.shape)
    kinds = x.kinds + "s" * (len(shape) - len(x.kinds))
    starts = x.starts + (0,) * (len(shape) - len(x.starts))
    ends = x.ends + (None,) * (len(shape) - len(x.ends))
    box = tuple((a, n if e is None else e) for a, e, n in zip(starts, ends, shape))
    if len(shape) >= 3 and kinds == "p" + "s" * (len(shape) - 1) and box[1:] == tuple(
            (0, n) for n in shape[1:]):       # one version of a stacked tile
        return GemmOperand(role, t.name, getattr(t, "kind", "global"), shape[1:])
    if len(shape) >= 3 and kinds == "p" + "s" * (len(shape) - 1) and role != "C" \
            and getattr(t, "kind", None) == "shared":   # a region of one version
        op = GemmOperand(role, t.name, "shared", shape[1:], box[1:])
        message = region_errors(op)
        if message is not None:
            _gemm_error(message)
        return op
    index = (f"{a}:{b}" if k == "s" else str(a) for k, (a, b) in zip(kinds, box))
    text = f"{t.name}[{', '.join(index)}]"
    message = form_error(role, text, shape, kinds)
    if message is None:
        op = GemmOperand(role, t.name, getattr(t, "kind", "global"), shape, box)
        message = region_errors(op)
    if message is not None:
        _gemm_error(message)
    return op


def _gemm_error(message):
    frame = kernel_frame(1)
    raise CompileError(message, *((frame.f_code.co_filename, frame.f_lineno)
                                  if frame is not None else ()))


def _check_gemm_operands(A, B, C, transpose_A, transpose_B):
    """T.gemm's operands checked as the compiler checks them (a region of a shared tile
    as A or B; ``frontend/gemm_operands.py``)."""
    if not any(isinstance(x, Region) for x in (A, B, C)):
        return
    ops = [_gemm_operand(role, x) for role, x in zip("ABC", (A, B, C))]
    if any(len(op.extents) != 2 for op in ops):
        return                          # the general checks below report it
    message = shape_error(*ops, transpose_A, transpose_B)
    if message is not None:
        _gemm_error(message)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0):
    """``C += op(A) @ op(B)`` with the products accumulated in C's dtype (float32
    inputs are rounded to TensorFloat-32 first, as the tensor cores do, except on a CPU
    target (``Target.has_tensor_cores``); float64, which
    no tensor-core instruction here takes, is multiplied and summed in float64)."""
    _check_gemm_operands(A, B, C, bool(transpose_A), bool(transpose_B))
    A, B, C = (tile_view(x, "T.gemm") for x in (A, B, C))
    gemm_reads((A, B), C, clear_accum)
    a = A.data.T if transpose_A else A.data
    b = B.data.T if transpose_B else B.data
    accumulate(a, b, A.dtype, C, clear_accum)


def gemm_reads(inputs, C, clear_accum):
    """A gemm reads its inputs and (unless it clears it) its accumulator, and writes C."""
    for x in inputs:
        x.check_written()
    if not clear_accum:
        C.check_written()
    C.wrote()


def accumulate(a, b, a_dtype, C, clear_accum):
    """``C += a @ b`` as the tensor cores compute it: ``a`` (M x K) and ``b`` (K x N)
    numpy arrays of ``a_dtype`` values, C a fragment (``T.gemm``, ``T.gemm_sp``)."""
    acc = C.dtype
    if clear_accum:
        C.data[...] = 0
    if acc.is_int:
        total = C.data.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)
        C.data[...] = total.astype(np.int32)
        return
    if acc.name == "float64":
        C.data[...] = C.data + a.astype(np.float64) @ b.astype(np.float64)
        return
    if a_dtype.name == "float32" and STATE.tensor_cores:
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


# -- reductions ----------------------------------------------------------------------

_COMBINE = {"sum": np.add, "max": FMAX, "min": FMIN, "abssum": np.add,
            "absmax": FMAX, "max_nan": MAXIMUM, "min_nan": MINIMUM,
            "absmax_nan": MAXIMUM, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
            "bitxor": np.bitwise_xor}


def _values(src, dst):
    data = np.asarray(src.data)
    target = dst.dtype.numpy
    with np.errstate(all="ignore"):
        return data.astype(target)


def _reduce(op, src, dst, dim, clear):
    dim = dim % src.data.ndim
    src.check_written()
    if not clear:
        dst.check_written()
    values = _values(src, dst)
    if op.startswith("abs"):
        values = np.abs(values)
    out = _COMBINE[op].reduce(values, axis=dim)
    if dst.data.ndim == src.data.ndim:
        out = np.expand_dims(out, dim)
    if out.shape != dst.data.shape:
        raise ValueError(f"T.reduce_{op}: dst has shape {dst.data.shape}, expected "
                         f"{out.shape} (src {src.data.shape} without dim {dim})")
    if not clear:
        out = _COMBINE[op](dst.data.astype(out.dtype), out)
    dst.data[...] = _to_storage(out, dst.dtype, dst.data.dtype)
    dst.wrote()


def reduce_sum(src, dst, dim, clear):
    """dst = Σ src along dim."""
    _reduce("sum", src, dst, dim, clear)


def reduce_max(src, dst, dim, clear, nan_propagate):
    """dst = max of src along dim (NaN ignored, or propagated with nan_propagate)."""
    _reduce("max_nan" if nan_propagate else "max", src, dst, dim, clear)


def reduce_min(src, dst, dim, clear, nan_propagate):
    """dst = min of src along dim (NaN ignored, or propagated with nan_propagate)."""
    _reduce("min_nan" if nan_propagate else "min", src, dst, dim, clear)


def reduce_abssum(src, dst, dim, clear):
    """dst = Σ |src| along dim."""
    _reduce("abssum", src, dst, dim, clear)


def reduce_absmax(src, dst, dim, clear, nan_propagate):
    """dst = max |src| along dim (NaN ignored, or propagated with nan_propagate)."""
    _reduce("absmax_nan" if nan_propagate else "absmax", src, dst, dim, clear)


def reduce_bitand(src, dst, dim, clear):
    """dst = & of src along dim (integers)."""
    _reduce("bitand", src, dst, dim, clear)


def reduce_bitor(src, dst, dim, clear):
    """dst = | of src along dim (integers)."""
    _reduce("bitor", src, dst, dim, clear)


def reduce_bitxor(src, dst, dim, clear):
    """dst = ^ of src along dim (integers)."""
    _reduce("bitxor", src, dst, dim, clear)


def cumsum(src, dst, dim, reverse):
    """Inclusive prefix sum of src along dim into dst (src itself when dst is None);
    ``reverse=True`` sums from the end."""
    _scan(lambda v, axis: np.cumsum(v, axis=axis, dtype=v.dtype), src, dst, dim, reverse)


def cummax(src, dst, dim, reverse):
    """Inclusive running maximum along dim, NaN ignored and +0 above −0 (the GPU's
    ``llvm.maxnum``, PTX ``max``)."""
    _scan(lambda v, axis: FMAX.accumulate(v, axis=axis), src, dst, dim, reverse)


def _scan(accumulate, src, dst, dim, reverse):
    src = tile_view(src, "a scan's src")         # a region of a shared tile, in place
    dst = src if dst is None else tile_view(dst, "a scan's dst")
    dim = dim % src.data.ndim
    src.check_written()
    values = _values(src, dst)
    if reverse:
        out = np.flip(accumulate(np.flip(values, dim), dim), dim)
    else:
        out = accumulate(values, dim)
    dst.data[...] = _to_storage(out, dst.dtype, dst.data.dtype)
    dst.wrote()


# -- atomics -------------------------------------------------------------------------

def _combine(op, old, value, dtype):
    if op == "add":
        with np.errstate(over="ignore"):
            return old + value
    if op == "max":
        return FMAX(old, value) if dtype.is_float else np.maximum(old, value)
    if op == "or":
        return np.bitwise_or(old, value)
    return FMIN(old, value) if dtype.is_float else np.minimum(old, value)


def _check_dtype(tensor, what):
    if tensor.dtype.name not in DTYPES:
        raise TypeError(f"{what}: atomics support {', '.join(DTYPES)}; got a "
                        f"{tensor.dtype.name} destination")


# the element-wise function of each op, where the tensor holds its dtype exactly (not a
# bfloat16 or float8 held in float32 and rounded at every store): ``ufunc.at`` combines
# repeated elements one at a time in the order given, which is lane order
_UFUNCS = {"add": (np.add, np.add), "max": (FMAX, np.maximum),
           "min": (FMIN, np.minimum), "or": (np.bitwise_or, np.bitwise_or)}


def _apply(op, tensor, idx, values, distinct=False, previous=True):
    """The atomic ``op`` of ``values`` into ``tensor`` at ``idx``; the elements count as
    written after it (in a rerun with garbage, ``sim/garbage.py``, an atomic into an
    output nothing wrote leaves a value that came from the garbage, which is compared)."""
    old = _apply_values(op, tensor, idx, values, distinct, previous)
    if tensor.unwritten is not None:
        tensor.unwritten[idx] = False
    return old


def _apply_values(op, tensor, idx, values, distinct=False, previous=True):
    """Combine ``values`` into ``tensor.data[idx]`` one lane at a time (in lane order when
    several lanes share an element; ``distinct``: known not to); the previous value of
    every lane (``previous=False``: None, not computed)."""
    data, dtype = tensor.data, tensor.dtype
    if not previous and not distinct and not dtype.held_in_float32:
        # lanes sharing elements, and no lane needs what it found (a histogram's adds):
        # in place, lane after lane
        with np.errstate(over="ignore", invalid="ignore"):
            _UFUNCS[op][0 if dtype.is_float else 1].at(data, idx, values)
        return None
    n = values.shape[0]
    old_out = np.empty(n, dtype=data.dtype)
    if n == 0:
        return old_out
    if distinct:
        flat = None
    else:
        flat = np.ravel_multi_index(idx, data.shape)
        if op == "add" and data.dtype.kind in "iu":
            _add_integers(data, idx, flat, values, old_out)
            return old_out
    if flat is None or not repeats(flat):           # every lane its own element: one round
        old = data[idx]
        old_out[:] = old
        data[idx] = _to_storage(_combine(op, old, values, dtype), dtype, data.dtype)
        return old_out
    remaining = np.arange(n)
    while remaining.size:
        # the first remaining lane of each element goes this round
        _, first = np.unique(flat[remaining], return_index=True)
        lanes = remaining[np.sort(first)]
        where = tuple(i[lanes] for i in idx)
        old = data[where]
        old_out[lanes] = old
        data[where] = _to_storage(_combine(op, old, values[lanes], dtype), dtype, data.dtype)
        remaining = np.setdiff1d(remaining, lanes, assume_unique=True)
    return old_out


def _add_integers(data, idx, flat, values, old_out):
    """``_apply``'s integer add at once: lane k of an element sees the element plus the
    values of the lanes before it, in lane order (a histogram's thousand lanes on a few
    bins had taken as many rounds); integers wrap, so sums and differences in the
    element's type are exact modulo its width."""
    order = np.argsort(flat, kind="stable")         # by element, lanes in order
    ranked = flat[order]
    v = np.asarray(values[order], dtype=data.dtype)
    first = np.r_[True, ranked[1:] != ranked[:-1]]
    starts = np.flatnonzero(first)
    segment = np.cumsum(first) - 1
    with np.errstate(over="ignore"):
        inclusive = np.cumsum(v, dtype=data.dtype)
        before = inclusive - v                      # the sum of every earlier lane
        offset = before[starts]                     # ... up to each element's first lane
        where = tuple(i[order] for i in idx)
        base = data[where]
        old_out[order] = base + (before - offset[segment])
        ends = np.r_[starts[1:], ranked.size] - 1
        element = tuple(i[starts] for i in where)
        data[element] = base[starts] + (inclusive[ends] - offset)


def _check_memory_order(op, memory_order):
    """The simulator runs atomics one after another, which every memory order allows; it
    checks the order as the compiler does."""
    message = memory_order_error(op, memory_order)
    if message is not None:
        raise CompileError(message)


def element_atomic(op, tensor, index, value, return_prev=False, per_lane=True,
                   memory_order=None):
    """The simulation of an element atomic: ``tensor[index] op= value`` on each active
    lane, once per lane."""
    what = f"T.atomic_{op}"
    _check_memory_order(op, memory_order)
    _check_dtype(tensor, what)
    message = element_dtype_error(op, tensor.dtype.name)
    if message is not None:
        raise TypeError(message)
    if op == "or" and np.asarray(value).dtype.kind not in "iub":
        raise TypeError(f"{what}: the value must be an integer, got {np.asarray(value).dtype}")
    dtype = tensor.dtype
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != tensor.data.ndim:
        raise IndexError(f"{what}: a {tensor.data.ndim}-d {tensor.name} indexed with "
                         f"{len(idx)} index(es)")
    mask = tensor._mask(idx)        # the lanes, and with safe memory the elements inside
    shapes = [np.shape(i) for i in idx] + [np.shape(value)]
    if mask is not None:
        shapes.append(np.shape(mask))
    if per_lane and STATE.lanes and not STATE.in_parallel:
        # per-thread code: every thread performs it, at an address and with a value the
        # same in all of them too (the GPU's threads each run the atomic)
        shapes.append((STATE.lanes,))
    elif per_lane and getattr(STATE.parallel, "lane", 0) is None:
        # a T.Parallel run vectorized: every iteration performs it, as on the GPU
        shapes.append(STATE.parallel.shape)
    elif per_lane and not STATE.lanes and STATE.parallel is None and op not in (
            "load", "store") and (STATE.role_threads or STATE.threads) > 1:
        # a statement of the block, which every thread runs: each performs the atomic
        # (all alike: no thread index is read; a previous value each thread would hold
        # its own of runs the kernel lane-wise, transform.uses_thread_index)
        shapes.append((STATE.role_threads or STATE.threads,))
    shape = np.broadcast_shapes(*shapes)
    active = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)
    idx = [np.asarray(i, dtype=np.int64) for i in idx]
    distinct = one_to_one(idx, shape)      # (every lane its own element: one round)
    idx_b = [np.broadcast_to(i, shape) for i in idx]
    tensor._check(idx_b, active)
    if tensor.unwritten is not None and op != "store":   # an atomic reads its destination
        tensor.check_written(tuple(np.where(active, i, 0) for i in idx_b), active)
    v = _num.cast(np.asarray(value, dtype=np.float32) if dtype.held_in_float32 else value,
                  dtype)
    v_b = np.broadcast_to(np.asarray(v, dtype=tensor.data.dtype), shape)
    sel = active.reshape(-1)
    where = tuple(i.reshape(-1)[sel] for i in idx_b)
    if return_prev or op == "load":
        # an acquiring access: the block orders its later reads itself (block_races.py)
        STATE.block_acquired.add(block_id())
    if op == "load":
        old = tensor.data[where]
    elif op == "store":         # lanes storing to one element: the last in lane order
        old = None
        tensor.data[where] = v_b.reshape(-1)[sel]
        if tensor.unwritten is not None:
            tensor.unwritten[where] = False
    else:
        old = _apply(op, tensor, where, v_b.reshape(-1)[sel], distinct, return_prev)
    if not return_prev:
        return None
    out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=tensor.data.dtype)
    out[sel] = old
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


def region_atomic(op, dst, value, return_prev=False, memory_order=None):
    """The simulation of the region form: every element of ``value`` combined into its
    element of ``dst`` (a region, a tensor or a shared tile) once."""
    what = f"T.atomic_{op}"
    _check_memory_order(op, memory_order)
    if return_prev:
        raise TypeError(f"{what}: return_prev=True needs an element destination, not a "
                        f"region")
    if np.ndim(value) == 0 and not hasattr(value, "data") and not hasattr(value, "tensor"):
        return _scalar_atomic(op, dst, value, what)
    (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext) = _resolve(
        value, dst, what)
    _check_dtype(d_t, what)
    s_idx, s_in = _block_index(s_start, s_ranged, s_ext, s_t.shape)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    safe = tuple(np.where(s_in, i, 0) for i in s_idx)
    keep = d_in.reshape(-1)
    if s_t.unwritten is not None:
        s_t.check_written(tuple(i.reshape(-1) for i in safe), s_in.reshape(-1) & keep)
    if d_t.unwritten is not None:           # an atomic reads its destination
        d_t.check_written(tuple(np.where(d_in, i, 0) for i in d_idx), d_in)
    values = np.where(s_in, s_t.data[safe], s_t.data.dtype.type(0)).reshape(-1)
    values = _num.cast(values.astype(np.float32) if d_t.dtype.held_in_float32 else values,
                       d_t.dtype)
    _apply(op, d_t, tuple(i.reshape(-1)[keep] for i in d_idx),
           np.asarray(values, dtype=d_t.data.dtype)[keep], previous=False)
    return None


def _scalar_atomic(op, dst, value, what):
    """A number combined into every element of the region ``dst`` once."""
    (d_t, d_start, d_ranged, d_ext), _ = _resolve(dst, dst, what)
    _check_dtype(d_t, what)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    if d_t.unwritten is not None:           # an atomic reads its destination
        d_t.check_written(tuple(np.where(d_in, i, 0) for i in d_idx), d_in)
    keep = d_in.reshape(-1)
    values = np.full(keep.shape, value, dtype=np.float64 if isinstance(
        value, float) or np.issubdtype(np.asarray(value).dtype, np.floating) else np.int64)
    values = _num.cast(values.astype(np.float32) if d_t.dtype.held_in_float32 else values,
                       d_t.dtype)
    _apply(op, d_t, tuple(i.reshape(-1)[keep] for i in d_idx),
           np.asarray(values, dtype=d_t.data.dtype)[keep], previous=False)
    return None


def _element_form(dst):
    # an element read outside a compiled kernel is a plain number: nothing to update
    return np.ndim(dst) == 0 and not hasattr(dst, "data") and not hasattr(dst, "tensor")


def _atomic(op, dst, value, memory_order, return_prev):
    if _element_form(dst):
        raise TypeError(f"T.atomic_{op}: the destination must be an element or region of a "
                        f"tensor or shared tile (C[i, j], C[r0:r1, c]), inside a kernel")
    return region_atomic(op, dst, value, return_prev, memory_order)


def atomic_add(dst, value, memory_order=None, return_prev=False):
    """``dst += value`` atomically: ``dst`` an element (``C[i, j]``, a global tensor or a
    shared tile) or a region (``C[r0:r1, c0:c1]``) with a tile ``value``. With
    ``return_prev=True`` (element form) returns the element's previous value."""
    return _atomic("add", dst, value, memory_order, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False):
    """``dst = max(dst, value)`` atomically (a NaN operand is ignored, as ``T.max``)."""
    return _atomic("max", dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False):
    """``dst = min(dst, value)`` atomically (a NaN operand is ignored, as ``T.min``)."""
    return _atomic("min", dst, value, memory_order, return_prev)


def atomic_or(dst, value, memory_order=None):
    """One element ``|=`` value (the front end rewrites the element form)."""
    raise TypeError("T.atomic_or: the destination must be one element of a tensor or "
                    "shared tile (F[i], F[i, j]), inside a kernel")


def _element(op):
    def fn(tensor, index, value, return_prev=False, per_lane=True, memory_order=None):
        return element_atomic(op, tensor, index, value, return_prev, per_lane, memory_order)
    fn.__name__ = fn.__qualname__ = f"element_atomic_{op}"
    return fn


# the simulator's meaning of the names the front end inserts (``__tj_atomic_add`` …)
SIM_ELEMENT = {op: _element(op) for op in OPS + ("load", "store")}


def atomic_load(src, memory_order="seq_cst"):
    """An element's value, read atomically (the front end rewrites the element form)."""
    raise TypeError("T.atomic_load: the source must be one element of a tensor or shared "
                    "tile (F[i], F[i, j]), inside a kernel")


def atomic_store(dst, value, memory_order="seq_cst"):
    """An element written atomically (the front end rewrites the element form)."""
    raise TypeError("T.atomic_store: the destination must be one element of a tensor or "
                    "shared tile (F[i], F[i, j]), inside a kernel")


# -- math functions ------------------------------------------------------------------
# numpy in the operands' float type. Integers, booleans and Python scalars compute in
# float32; float16 computes in float32 and rounds back, as on the GPU; bfloat16, which
# the simulator holds in float32, is rounded on store. The GPU code
# (``codegen/lowering/math.py``) is within 2 ulp of the correctly rounded result.

def _math_dtypes(*xs):
    """(compute dtype, result dtype) of a math function's operands."""
    floats = [np.asarray(x).dtype for x in xs
              if type(x) not in (bool, int, float) and np.asarray(x).dtype.kind == "f"]
    if not floats:
        return np.dtype(np.float32), np.dtype(np.float32)
    out = np.result_type(*floats)
    return (np.dtype(np.float32) if out == np.float16 else out), out


def _math(fn, *xs):
    compute, out = _math_dtypes(*xs)
    with np.errstate(all="ignore"):
        r = np.asarray(fn(*(np.asarray(x, dtype=compute) for x in xs)))
        r = r.astype(out, copy=False)
    return r[()] if r.ndim == 0 else r


def _stable_sigmoid(x):
    e = np.exp(-np.abs(x))                 # ≤ 1: no overflow for any x
    return np.where(x >= 0, 1, e) / (1 + e)


_erf64 = np.frompyfunc(_math_module.erf, 1, 1)


def exp(x):
    """e^x."""
    return _math(np.exp, x)


def exp2(x):
    """2^x."""
    return _math(np.exp2, x)


def log(x):
    """Natural logarithm (−inf at 0, NaN below)."""
    return _math(np.log, x)


def log2(x):
    """Base-2 logarithm."""
    return _math(np.log2, x)


def sqrt(x):
    """Square root (correctly rounded)."""
    return _math(np.sqrt, x)


def rsqrt(x):
    """1/sqrt(x)."""
    return _math(lambda a: 1 / np.sqrt(a), x)


def tanh(x):
    """Hyperbolic tangent."""
    return _math(np.tanh, x)


def sigmoid(x):
    """1/(1 + e^-x), without overflow for large |x|."""
    return _math(_stable_sigmoid, x)


def pow(x, y):  # noqa: A001 - TileLang's name
    """x^y with C99's special cases (pow(x, 0) = 1, pow(1, y) = 1, NaN for a negative
    base and a non-integer exponent, …); the operands meet as in arithmetic."""
    return _math(np.power, x, y)


def floor(x):
    """Largest integer not greater than x, as a float."""
    return _math(np.floor, x)


def ceil(x):
    """Smallest integer not less than x, as a float."""
    return _math(np.ceil, x)


def erf(x):
    """Error function."""
    return _math(lambda a: np.asarray(_erf64(a.astype(np.float64)), np.float64), x)


# -- debugging ---------------------------------------------------------------------

def device_assert(cond, msg=""):
    """Check ``cond`` on the device in kernels compiled with ``debug=True`` (a failure
    prints the message, the block and thread, and stops the kernel); always checked in
    the simulator (``AssertionError`` naming the kernel's line)."""
    ok = np.all(cond) if STATE.mask is None else np.all(np.asarray(cond) | ~STATE.mask)
    if not ok:
        frame = sys._getframe(2)           # the kernel's line, past T.device_assert
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        raise AssertionError(f"T.device_assert failed: {msg}\n  File "
                             f"\"{frame.f_code.co_filename}\", line {frame.f_lineno}\n    {line}")


def assume(cond):
    """``T.assume``: false in any active lane is an ``AssertionError`` at the kernel's
    line (on the GPU the compiler relies on it: undefined behaviour)."""
    ok = np.all(cond) if STATE.mask is None else np.all(np.asarray(cond) | ~STATE.mask)
    if not ok:
        frame = sys._getframe(2)           # the kernel's line, past T.assume
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        raise AssumptionError(f"T.assume: the condition is false here (on the GPU the "
                             f"compiler relies on it: undefined behaviour)\n  File "
                             f"\"{frame.f_code.co_filename}\", line {frame.f_lineno}\n    {line}")


def print(value, msg=""):  # noqa: A001 - TileLang's name
    """Print ``value`` from the device (each thread that reaches it), prefixed by
    ``msg``; in the simulator, Python's print of the value (a whole tile at once)."""
    if STATE.peeking and STATE.peeked:
        # read from elements nothing wrote (on the GPU: whatever the memory held)
        garbage.say(f"{msg}(unwritten)")
        return
    mask = STATE.mask
    shown = value if mask is None or np.ndim(value) == 0 else np.where(mask, value, 0)
    garbage.say(f"{msg}{shown}" if msg else shown)


def print_at(value, msg, lane, *index):
    """``msg[index] = value``, once for the block (thread ``lane``'s value where the
    element differs between threads), or every thread's for ``lane`` -1."""
    where = ", ".join(str(int(i)) for i in np.asarray(index).reshape(len(index), -1)[:, 0])
    if STATE.peeking and STATE.peeked:
        # an element nothing wrote (on the GPU: whatever the memory held)
        garbage.say(f"{msg}[{where}] = (unwritten)")
        return
    if np.ndim(value) == 0:
        garbage.say(f"{msg}[{where}] = {value}")
    elif lane >= 0:
        garbage.say(f"{msg}[{where}] = {np.asarray(value).reshape(-1)[lane]}")
    else:
        mask = STATE.mask
        for t, v in enumerate(np.asarray(value).reshape(-1)):
            if mask is None or np.asarray(mask).reshape(-1)[t]:
                garbage.say(f"[thread {t}] {msg}[{where}] = {v}")


def _block_wide(name, fn):
    """``fn``, which the whole block does: in a kernel with per-thread code, checked
    first (``threads.block_wide``)."""
    def run(*args, **kwargs):
        if STATE.lanes and name == "copy" and any(_own(a) for a in args[:2]):
            return _own_copy(*args[:2])
        if STATE.lanes:
            block_wide(name, args)
        return fn(*args, **kwargs)
    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


# the meaning of each ``T.<name>`` the language delegates (``language/_semantics.py``)
MEANINGS = {name: globals()[name] for name in (
    "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var", "copy", "fill", "clear",
    "any_of", "all_of", "transpose",
    "gemm", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax",
    "reduce_bitand", "reduce_bitor", "reduce_bitxor", "cumsum", "cummax", "atomic_add",
    "atomic_max", "atomic_min", "atomic_or", "atomic_load", "atomic_store", "exp", "exp2",
    "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "pow", "floor", "ceil", "erf",
    "device_assert", "assume", "print", "print_at")}
def sync_threads(barrier_id=None, arrive_count=None):
    """A block barrier: the simulator runs a block's threads in step, so nothing to wait
    for; every thread must reach it (checked where the code is per-thread). With
    ``barrier_id``: a named barrier (``named_barriers.py``)."""
    if barrier_id is not None or arrive_count is not None:
        from tilejit.sim.named_barriers import sync_threads_named   # it imports roles.py
        return sync_threads_named(barrier_id, arrive_count)
    if STATE.lanes:
        block_wide("sync_threads")
    from tilejit.sim.named_barriers import block_barrier   # it imports roles.py
    block_barrier()


def sync_grid():
    """The grid's barrier: the block's barrier, the wait for every block (``grid.py``),
    the block's barrier."""
    if STATE.lanes:
        block_wide("sync_grid")
    from tilejit.sim.named_barriers import block_barrier   # it imports roles.py
    from tilejit.sim.grid import sync_grid as wait_for_the_grid
    block_barrier()
    wait_for_the_grid()
    block_barrier()


def named_barrier_arrive(barrier_id, arrive_count):
    from tilejit.sim.named_barriers import named_barrier_arrive as arrive  # imports roles.py
    return arrive(barrier_id, arrive_count)


def set_max_nreg(reg_count, is_inc):
    """``setmaxnreg``: no value changes; its arguments checked, and in per-thread code
    every thread of a warpgroup that runs it runs it (``.sync.aligned``)."""
    problem = check_max_nreg(reg_count, is_inc)
    if problem:
        raise ValueError(problem)
    active = _active() if STATE.lanes else None
    if active is not None:
        groups = np.asarray(active).reshape(-1, 128) if active.size % 128 == 0 else None
        if groups is None or (groups.any(1) & ~groups.all(1)).any():
            raise ThreadCodeError(f"T.set_max_nreg runs in part of a warpgroup: every thread "
                                  f"of a warpgroup that runs it must run it (setmaxnreg is "
                                  f"warpgroup-wide){_caller_location(2)}")


def annotate_layout(layouts):
    """``T.annotate_layout``: the simulator holds tiles in logical order, so a layout
    changes no value; a ``T.Layout`` must still be one the tile can have (its shape, a
    bijection onto its elements: ``LayoutError`` naming the tile otherwise), as the
    compiler checks; a ``T.Fragment`` one the fragment can have in this block (its
    shape, threads below the block's, one element per thread and local index). A global
    tensor's layout says where the host finds each element, so the launch runs on its
    elements gathered in logical order (``runtime.lay_out_global``).
    Fragments are logical tiles here: the compiler lets no code reach a fragment's
    elements but through tile operations and ``T.Parallel`` loops, whose values do not
    depend on where the elements are held."""
    if not isinstance(layouts, dict):
        raise TypeError(f"T.annotate_layout: expected a dict {{tile: layout}}, got "
                        f"{type(layouts).__name__}")
    for tile, layout in layouts.items():
        name = getattr(tile, "name", "the tile")
        if isinstance(layout, UserFragment):
            layout.check(getattr(tile, "shape", None), repr(name), STATE.threads or None)
        elif isinstance(layout, UserLayout):
            # a shared tile's may be injective only (storage past its size), as the
            # compiler takes it; a tensor's is a bijection (the host finds each element)
            layout.check(getattr(tile, "shape", None), repr(name),
                         injective=getattr(tile, "kind", None) == "shared")
            if isinstance(tile, SimTensor) and tile.kind is None:     # a global tensor
                lay_out_global(tile, layout)


def annotate_safe_value(values):
    """``T.annotate_safe_value({A: v})``: the elements outside global tensor A read as v
    from here on in this launch (element reads and tile copies)."""
    if not isinstance(values, dict):
        raise TypeError(f"T.annotate_safe_value: expected a dict {{tensor: value}}, got "
                        f"{type(values).__name__}")
    for tensor, value in values.items():
        if not (isinstance(tensor, SimTensor) and tensor.kind is None):
            raise TypeError(f"T.annotate_safe_value: the keys are tensor parameters of the "
                            f"kernel, got {getattr(tensor, 'name', tensor)!r}")
        tensor.safe_value = value


MEANINGS.update(reshape=views.reshape, view=views.view, make_tensor=views.make_tensor,
                set_max_nreg=set_max_nreg,
                annotate_layout=annotate_layout, annotate_safe_value=annotate_safe_value)
MEANINGS.update({name: _block_wide(name, MEANINGS[name]) for name in BLOCK_WIDE
                 if name != "sync_threads" and name in MEANINGS})    # gemm_sp: sparse.py
# checked by itself: a named barrier is some threads' own
MEANINGS.update(sync_threads=sync_threads, sync_grid=sync_grid,
                named_barrier_arrive=named_barrier_arrive)

"""A thread's own asynchronous copies in the simulator (``language/cp_async.py``).

``T.ptx_cp_async`` reads its source elements when it is issued and holds them, pending,
with the issuing thread's other copies in flight (per lane in per-thread code: PTX
tracks commit groups, waits and ``noinc`` arrivals per thread); they land in the shared
tile only when the copies complete: at the completion of the mbarrier phase that the
thread's ``T.cp_async_barrier_noinc`` arrived on, or at the thread's
``T.ptx_wait_group``. Until then the destination's elements read as unwritten (an
``UninitializedReadError``: on the GPU such a read races with the copy); a copy never
waited for never lands. The checks are the
GPU's: 4, 8 or 16 bytes, one row of the source (its last dimension of stride 1) and of
the destination, inside both (a source outside the tensor only under a false predicate,
which writes zeros), addresses aligned to the copy's size, and a shared destination and
a global source of the same element type.
"""
from __future__ import annotations

import numpy as np

from tilejit.language.cp_async import CP_ASYNC_BYTES
from tilejit.sim.roles import _arrivals, _barrier, mbarrier_arrive
from tilejit.sim import garbage
from tilejit.sim.runtime import STATE, SimTensor, _caller_location


class _Pending:
    """Each thread's copies in flight (PTX tracks them per thread): by lane, those not yet
    committed to a group and the committed groups, oldest first. Outside per-thread code
    the block's threads do the same thing: one lane, 0, stands for them."""

    __slots__ = ("open", "groups")

    def __init__(self):
        self.open, self.groups = {}, {}

    def add(self, lane, copy):
        self.open.setdefault(lane, []).append(copy)

    def commit(self, lane):
        self.groups.setdefault(lane, []).append(self.open.pop(lane, []))

    def take_all(self, lane) -> list:
        """The lane's every copy in flight, committed or not, in issue order."""
        out = [c for group in self.groups.pop(lane, []) for c in group]
        return out + self.open.pop(lane, [])

    def older_than(self, lane, keep) -> list:
        """The lane's committed groups but its ``keep`` newest, in issue order."""
        groups = self.groups.get(lane, [])
        done, self.groups[lane] = groups[:max(0, len(groups) - keep)], groups[
            max(0, len(groups) - keep):]
        return [c for group in done for c in group]


def _pending() -> _Pending:
    p = STATE.cp_async
    if p is None:
        p = STATE.cp_async = _Pending()
    return p


def reset() -> None:
    """A block starts with no copies in flight (``runner.py``, ``roles.py``)."""
    STATE.cp_async = _Pending()


def _active_lanes():
    """The lanes (threads) that run the statement: in per-thread code those the branches
    let through, else lane 0 for the block."""
    lanes, mask = STATE.lanes, STATE.mask
    if not lanes:
        return [0] if mask is None or np.ndim(mask) > 0 or bool(mask) else []
    if mask is None:
        return list(range(lanes))
    if np.ndim(mask) == 0:
        return list(range(lanes)) if bool(mask) else []
    return [int(k) for k in np.flatnonzero(np.broadcast_to(mask, (lanes,)))]


def _lanes_of(values, shape):
    return [np.broadcast_to(np.asarray(v), shape).reshape(-1) for v in values]


def cp_async(dst, dst_index, src, src_index, n, predicate=True):
    where = _caller_location(2)
    what = "T.ptx_cp_async"
    if not (isinstance(dst, SimTensor) and dst.kind == "shared"):
        raise TypeError(f"{what}: the destination must be an element of a shared tile, got "
                        f"{getattr(dst, 'name', dst)!r}{where}")
    if not (isinstance(src, SimTensor) and src.kind is None):
        raise TypeError(f"{what}: the source must be an element of a global tensor, got "
                        f"{getattr(src, 'kind', None) or type(src).__name__} "
                        f"{getattr(src, 'name', src)!r}{where}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{what}: num_elems must be an integer known at compile time, got "
                        f"{n!r}{where}")
    n = int(n)
    if dst.dtype != src.dtype:
        raise TypeError(f"{what}: the source ({src.dtype}) and destination ({dst.dtype}) must "
                        f"have one element type{where}")
    size = n * dst.dtype.bits // 8
    if size not in CP_ASYNC_BYTES:
        raise ValueError(f"{what}: {n} elements of {dst.dtype} are {size} bytes; cp.async "
                         f"copies 4, 8 or 16{where}")
    for name, t, index in (("destination", dst, dst_index), ("source", src, src_index)):
        if len(index) != t.data.ndim:
            raise IndexError(f"{what}: the {name} {t.name} has {t.data.ndim} dimension(s), "
                             f"indexed with {len(index)}{where}")
    strides = src.gpu_strides or tuple(s // src.data.itemsize for s in src.data.strides)
    if src.data.ndim and strides[-1] != 1 and src.data.shape[-1] > 1:
        raise ValueError(f"{what}: the source {src.name}'s last dimension has stride "
                         f"{strides[-1]}: a copy reads consecutive elements{where}")
    mask = STATE.mask
    if mask is not None and np.ndim(mask) == 0 and not bool(mask):
        return
    has_mask = mask is not None and np.ndim(mask) > 0
    parts = list(dst_index) + list(src_index) + [predicate] + ([mask] if has_mask else [])
    shape = np.broadcast_shapes(*(np.shape(p) for p in parts))
    flat = _lanes_of(parts, shape)
    d_idx, s_idx = flat[:len(dst_index)], flat[len(dst_index):len(dst_index) + len(src_index)]
    pred = flat[len(dst_index) + len(src_index)].astype(bool)
    active = flat[-1].astype(bool) if has_mask else np.ones(pred.shape, bool)
    rows = np.arange(n)
    copies = []
    per_lane = bool(STATE.lanes) and shape == (STATE.lanes,) and not STATE.in_parallel
    for k in np.flatnonzero(active):
        d = tuple(int(i[k]) for i in d_idx)
        s = tuple(int(i[k]) for i in s_idx)
        _inside(dst, d, n, "destination", where)
        _aligned(d, dst.data.shape, None, size, dst, "destination", where)
        if pred[k]:
            _inside(src, s, n, "source", where)
            _aligned(s, src.data.shape, strides, size, src, "source", where)
            values = src.data[s[:-1] + (slice(s[-1], s[-1] + n),)].copy()
        else:
            values = np.zeros(n, dst.data.dtype)
        copies.append((int(k) if per_lane else 0, d[:-1] + (d[-1] + rows,), values))
    pending = _pending()
    for lane, idx, values in copies:
        if dst.races is not None:   # the issuer writes the elements, as far as order goes
            dst.races.write(idx)
        _in_flight(dst, idx)
        pending.add(lane, (dst, idx, values))


def _in_flight(dst, idx):
    """Until a copy lands its elements read as unwritten: a read of them before the copy
    completes is an error here, as it is a race on the GPU."""
    if dst.unwritten is None:
        dst.unwritten = np.zeros(dst.data.shape, dtype=bool)
    dst.unwritten[idx] = True
    garbage.pour(dst, idx)      # (a rerun's: the GPU's bytes are either's mid-copy)


def _inside(t, index, n, what, where):
    shape = t.data.shape
    last = index[:-1] + (index[-1] + n - 1,)
    if any(not 0 <= i < e for i, e in zip(index, shape)) or not last[-1] < shape[-1]:
        raise IndexError(f"T.ptx_cp_async: the {what} {t.name}[{', '.join(map(str, index))}] "
                         f"and the {n - 1} elements after it leave its shape {tuple(shape)} "
                         f"(out of bounds){where}")


def _aligned(index, shape, strides, size, t, what, where):
    if strides is None:         # a shared tile: row-major
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
    offset = sum(i * s for i, s in zip(index, strides)) * t.dtype.bits // 8
    if offset % size:
        raise ValueError(f"T.ptx_cp_async: the {what} {t.name}[{', '.join(map(str, index))}] "
                         f"is at byte {offset} of it, not a multiple of the copy's {size} "
                         f"bytes (cp.async needs its addresses aligned){where}")


def _land(copies):
    for dst, idx, values in copies:
        dst.data[idx] = values
        if dst.unwritten is not None:
            dst.unwritten[idx] = False
            if dst.races is None and not dst.unwritten.any():
                dst.unwritten = None


def cp_async_barrier_noinc(barrier):
    """Each active thread arrives once its own copies in flight have landed: the copies
    land when the barrier's phase completes."""
    what = "T.cp_async_barrier_noinc"
    b = _barrier(barrier, what)
    lanes = _active_lanes()
    if not lanes:
        return
    _arrivals(what)
    p = _pending()
    copies = [c for lane in lanes for c in p.take_all(lane)]
    if copies:
        b.landing.append(lambda: _land(copies))
    mbarrier_arrive(b)


def ptx_commit_group():
    p = _pending()
    for lane in _active_lanes():
        p.commit(lane)


def ptx_wait_group(num):
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 0:
        raise ValueError(f"T.ptx_wait_group: expected a count of groups >= 0 known at compile "
                         f"time, got {num!r}{_caller_location(2)}")
    p = _pending()
    for lane in _active_lanes():
        _land(p.older_than(lane, int(num)))


MEANINGS = {"cp_async_barrier_noinc": cp_async_barrier_noinc,
            "ptx_commit_group": ptx_commit_group, "ptx_wait_group": ptx_wait_group}

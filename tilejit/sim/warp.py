"""The simulator's meaning of the warp primitives (``language/warp.py``).

In a kernel that reads its thread index the block runs lane-wise (``threads.py``): a
value is an array over the block's threads, and lane ``t`` of warp ``t // 32`` is
element ``t``. The reductions combine in the GPU's order (a butterfly: lane ``l`` adds
lane ``l ^ 16``, then ``l ^ 8`` … ``l ^ 1``), so floating-point sums agree with the
device bit for bit. In a kernel that does not, every thread holds the same value, and
the primitives act on 32 copies of it; but in a T.Parallel of one iteration per thread
(iteration k on thread k, ``runtime.parallel_vectorized``'s ``own_threads``) they act
across the iterations, as across the GPU's lanes. A primitive under a branch that some threads skip
is a ``ThreadCodeError``: on the GPU the skipped lanes' values are undefined; a shuffle
whose mask names only lanes that run it with the same mask (half-warps apart, each
with its own) is not, and reading a lane outside the mask is.

The votes (``T.any_sync``, ``T.all_sync``, ``T.ballot_sync``) run over the lanes of
their mask, as ``vote.sync`` does: a lane whose mask does not name it, or a lane of some
calling lane's mask that does not call the vote with the same mask, is a
``ThreadCodeError`` (undefined on the GPU); bits of lanes outside the mask are 0 in a
ballot. The matches (``T.match_any_sync``, ``T.match_all_sync``) run over their mask in
the same way and compare the lanes' values bit for bit (a float's bits, so NaNs of the
same bits match and 0.0 does not match -0.0). ``T.activemask()`` names the lanes of the
warp that run it (those of the branches taken: the largest set the GPU may report). The
predicate block barriers (``T.syncthreads_count|and|or``) must be reached by every thread
of the block.
"""
from __future__ import annotations

import numpy as np

from tilejit.language.minmax import FMAX, FMIN
from tilejit.sim.runtime import STATE
from tilejit.sim.threads import ThreadCodeError, _active, synced
from tilejit.sim.runtime import _caller_location

WARP = 32


def _iteration_lanes(value, name, members=None):
    """In a T.Parallel of one iteration per thread (iteration k on thread k): the value
    over the iterations, in the threads' order, or None elsewhere."""
    each = STATE.iteration_threads
    if STATE.lanes or each is None:
        return None
    mask = STATE.mask
    if mask is not None and np.ndim(mask) > 0:
        active = np.broadcast_to(mask, each.shape)
        flat = _by_lane(active, False).reshape(-1) if STATE.iteration_slots is not None \
            else active.reshape(-1)
        if not np.all(active) and not _whole_warps(flat) and \
                not _masked(members, flat, name):
            raise ThreadCodeError(
                f"T.{name} inside a branch that depends on the T.Parallel's index: every "
                f"lane of the warp must reach a warp shuffle (the skipped lanes' values "
                f"are undefined on the GPU){_caller_location(4)}")
    if STATE.iteration_slots is not None:
        return _by_lane(value, 0)
    return np.broadcast_to(np.asarray(value), each.shape).reshape(-1).copy()


def _by_lane(value, fill):
    """A value over a ``loop_layout=`` loop's iterations as an array over (thread, local
    index): the iterations that run at one local index meet in a warp primitive, as the
    threads' loops over their local indices do on the GPU (``fill`` where a thread has
    no iteration)."""
    each, slot = STATE.iteration_threads, STATE.iteration_slots
    array = np.broadcast_to(np.asarray(value), each.shape)
    out = np.full(STATE.iteration_holes.shape, fill, dtype=array.dtype)
    out[each, slot] = array
    return out


def _from_lanes(values):
    """The inverse of ``_by_lane``: each iteration's value."""
    return values[STATE.iteration_threads, STATE.iteration_slots]


def _no_holes(src, name):
    """A warp primitive of a ``loop_layout=`` loop reading a lane that runs no iteration
    at that local index (the layout gives that thread fewer, or none): undefined."""
    holes = STATE.iteration_holes
    slots = np.broadcast_to(np.arange(holes.shape[1]), src.shape)
    readers = ~holes
    bad = readers & holes[np.minimum(src, holes.shape[0] - 1), slots]
    if bad.any():
        t, s = (int(x) for x in np.argwhere(bad)[0])
        raise ThreadCodeError(
            f"T.{name} in a T.Parallel with loop_layout=: thread {t} reads lane "
            f"{int(src[t, s]) % WARP} of its warp at local index {s}, where the layout "
            f"gives that lane no iteration (its value is undefined on the GPU)"
            f"{_caller_location(3)}")


def _masked(members, active, name) -> bool:
    """Whether a shuffle under a branch names in its mask only lanes that run it, with
    the same mask (``mask=0xFFFF`` in half-warps that part ways): ``_members`` checks it
    as ``shfl.sync`` requires. The full mask keeps the branch error."""
    if members is None:
        return False
    masks = np.broadcast_to(np.asarray(members, dtype=np.int64) & FULL, active.shape)
    if np.all(masks[active] == FULL):
        return False
    _members(masks, active, name)
    return True


def _sources(mask, lane, src, name):
    """A shuffle that reads a lane outside the reading lane's mask reads an undefined
    value on the GPU (PTX ISA, shfl.sync): an error here."""
    masks = np.broadcast_to(np.asarray(mask, dtype=np.int64) & FULL, lane.shape)
    if np.all(masks == FULL):
        return
    active = _active() if STATE.lanes else None
    active = np.ones(lane.shape, bool) if active is None else np.broadcast_to(active, lane.shape)
    named = (masks >> (src % WARP)) & 1
    bad = np.flatnonzero(active & (named == 0))
    if bad.size:
        t = int(bad[0])
        raise ThreadCodeError(
            f"T.{name}: lane {t % WARP} of warp {t // WARP} reads lane {int(src[t]) % WARP}, "
            f"which its mask {int(masks[t]):#010x} does not name (undefined on the GPU)"
            f"{_caller_location(3)}")


def _lanes(value, name, members=None):
    per_iteration = _iteration_lanes(value, name, members)
    if per_iteration is not None and STATE.iteration_slots is not None:
        return per_iteration, _from_lanes
    if per_iteration is not None:
        return per_iteration, STATE.iteration_threads.shape
    if not STATE.lanes and getattr(STATE.parallel, "lane", None) is not None:
        # (a body with break, continue, while or a per-iteration local array runs one
        # iteration at a time: no other iteration's value is there to exchange)
        raise ThreadCodeError(
            f"T.{name} in a T.Parallel the simulator runs one iteration at a time (its "
            f"body has a break, continue, while, or a T.alloc_local array): a warp "
            f"primitive there is not simulated; write the loop's per-thread code with "
            f"T.get_thread_binding() in place of the T.Parallel{_caller_location(3)}")
    if not STATE.lanes and STATE.parallel is not None and np.ndim(value) > 0 and \
            np.size(value) > 1:
        # a value over a T.Parallel's iterations that are not one per thread: which
        # lanes meet is the compiler's distribution of them, not the program's
        raise ThreadCodeError(
            f"T.{name} in a T.Parallel whose iterations are not one per thread (a value "
            f"over {np.size(value)} iterations): which lanes a warp primitive joins "
            f"depends on how the compiler spreads them; give the loop as many iterations "
            f"as the block has threads, or use T.get_thread_binding(){_caller_location(3)}")
    lanes = STATE.lanes or WARP
    active = _active() if STATE.lanes else None
    if active is not None and not np.all(active) and not _whole_warps(active) and \
            not _masked(members, np.asarray(active, dtype=bool), name):
        raise ThreadCodeError(
            f"T.{name} inside a branch that depends on the thread index: every lane of the "
            f"warp must reach a warp shuffle (the skipped lanes' values are undefined on "
            f"the GPU){_caller_location(3)}")
    array = np.asarray(value)
    return np.broadcast_to(array, (lanes,)).copy(), STATE.lanes == 0


def _whole_warps(active) -> bool:
    """Whether a branch holds each warp whole or not at all (``if warp_id == 0:``): the
    lanes that reach the shuffle are all of their warps'. The other warps' lanes compute
    values the branch discards."""
    active = np.asarray(active, dtype=bool)
    if active.ndim != 1:
        return False
    return all(w.all() or not w.any() for w in
               (active[i:i + WARP] for i in range(0, active.shape[0], WARP)))


def _result(values, uniform):
    """``uniform``: True (every thread holds the value: one of them), False (the lanes'
    values), or the shape of the T.Parallel whose iterations are the lanes."""
    if callable(uniform):
        return uniform(values)
    if isinstance(uniform, tuple):
        return values.reshape(uniform)
    return values[0].item() if uniform else values


def _width(width, name):
    if not isinstance(width, (int, np.integer)) or width not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"T.{name}: width must be a power of two up to 32, got {width!r}")
    return int(width)


def _butterfly(name, combine):
    def reduce(value):
        x, uniform = _lanes(value, f"warp_reduce_{name}")
        lane = np.arange(x.shape[0])
        if x.ndim == 2:                 # over (thread, local index): loop_layout=
            lane = lane[:, None]
            for offset in (16, 8, 4, 2, 1):
                _no_holes(np.broadcast_to(lane ^ offset, x.shape), f"warp_reduce_{name}")
        with np.errstate(all="ignore"):
            for offset in (16, 8, 4, 2, 1):
                x = combine(x, x[lane ^ offset, ...] if x.ndim == 1 else
                            np.take_along_axis(x, np.broadcast_to(lane ^ offset, x.shape),
                                               0)).astype(x.dtype)
        return _result(x, uniform)
    reduce.__name__ = f"warp_reduce_{name}"
    return reduce


def _shuffle(name, source):
    def shuffle(value, delta, width=WARP, mask=0xFFFFFFFF):
        x, uniform = _lanes(value, name, mask)
        w = _width(width, name)
        lane = np.arange(x.shape[0])
        if x.ndim == 2:                 # over (thread, local index): loop_layout=
            lane = np.broadcast_to(lane[:, None], x.shape)
            d = _by_lane(np.asarray(delta, dtype=np.int64), 0)
            src = source(lane, d, w)
            masks = _by_lane(np.asarray(mask, dtype=np.int64), FULL)
            for s in range(x.shape[1]):
                _sources(masks[:, s], lane[:, s], src[:, s], name)
                _launched(src[:, s], x.shape[0], name, ~STATE.iteration_holes[:, s])
            _no_holes(src, name)
            return _result(np.take_along_axis(x, np.minimum(src, x.shape[0] - 1), 0),
                           uniform)
        d = np.broadcast_to(np.asarray(delta, dtype=np.int64), lane.shape)
        src = source(lane, d, w)
        if uniform is False:
            _sources(mask, lane, src, name)
        if uniform is True:     # (one value in every lane: the lanes the block launched)
            if STATE.threads and STATE.threads % WARP:
                every = np.arange(STATE.threads)
                _launched(source(every, np.broadcast_to(d[:1], every.shape), w),
                          STATE.threads, name)
        else:
            _launched(src, x.shape[0], name, _running(uniform))
        # (a lane that does not run the shuffle may name one past the block: its result
        # is discarded)
        return _result(x[np.minimum(src, x.shape[0] - 1)], uniform)
    shuffle.__name__ = name
    return shuffle


def _running(uniform):
    """The lanes running a warp primitive: the active threads, or in a T.Parallel of one
    iteration per thread (``uniform`` its shape) the iterations its branch holds."""
    if STATE.lanes:
        return _active()
    mask = STATE.mask
    if isinstance(uniform, tuple) and mask is not None and np.ndim(mask) > 0:
        return np.broadcast_to(mask, uniform).reshape(-1)
    return None


def _launched(src, threads, name, active=None):
    """A shuffle in a block whose last warp is partial reads only lanes that exist: one
    never launched holds no value (undefined on the GPU). ``active``: the lanes running
    the shuffle (None: all)."""
    bad = src >= threads
    if active is not None:
        bad &= np.broadcast_to(np.asarray(active, dtype=bool), bad.shape)
    if bad.any():
        t = int(np.argmax(bad))
        raise ThreadCodeError(
            f"T.{name}: lane {t % WARP} of warp {t // WARP} reads lane {int(src[t]) % WARP}, "
            f"which the block of {threads} threads does not have (its value is undefined "
            f"on the GPU): a width that divides the threads keeps the lanes among them"
            f"{_caller_location(3)}")


def _xor(lane, d, w):
    return (lane // w) * w + ((lane % w) ^ (d % w))


def _down(lane, d, w):
    return np.where(lane % w + d < w, lane + d, lane)


def _up(lane, d, w):
    return np.where(lane % w >= d, lane - d, lane)


def _idx(lane, d, w):
    return (lane // w) * w + d % w


FULL = 0xFFFFFFFF


def _predicate(value, name):
    """A vote's predicate as booleans; a float one is a ``TypeError``, as in TileLang."""
    array = np.asarray(value)
    if array.dtype.kind not in "biu":
        raise TypeError(f"T.{name} requires an integer or boolean predicate, but got "
                        f"{array.dtype}")
    return array != 0


def _block(value, name):
    """``value`` over the block's threads (all of them when the kernel does not read its
    thread index), the active threads and whether the result is the same in all."""
    lanes = STATE.lanes or STATE.threads or WARP
    active = _active() if STATE.lanes else None
    active = np.ones(lanes, dtype=bool) if active is None else np.broadcast_to(active, (lanes,))
    return np.broadcast_to(value, (lanes,)), active, STATE.lanes == 0


def _members(masks, active, name):
    """The lanes each active lane's vote runs over (a boolean array: lane × lane of its
    warp), checked as ``vote.sync`` requires."""
    lanes = masks.shape[0]
    bits = ((masks[:, None] >> np.arange(WARP)) & 1).astype(bool)
    lane = np.arange(lanes)
    for t in np.flatnonzero(active):
        mask, base = int(masks[t]), t - t % WARP
        if not bits[t, t % WARP]:
            raise ThreadCodeError(
                f"T.{name}: lane {t % WARP} of warp {t // WARP} calls it with mask "
                f"{mask:#010x}, which does not name the lane (undefined on the GPU)"
                f"{_caller_location(3)}")
        for m in base + np.flatnonzero(bits[t]):
            if m >= lanes or not active[m] or int(masks[m]) != mask:
                what = ("does not exist" if m >= lanes else "does not call it" if not
                        active[m] else f"calls it with mask {int(masks[m]):#010x}")
                raise ThreadCodeError(
                    f"T.{name}: lane {t % WARP} of warp {t // WARP} calls it with mask "
                    f"{mask:#010x}, and lane {m % WARP}, which the mask names, {what}: "
                    f"every lane of the mask must call it with the same mask (undefined "
                    f"on the GPU){_caller_location(3)}")
    return bits, lane - lane % WARP


def _vote(name, reduce, dtype):
    def vote(predicate, mask=FULL):
        p, active, uniform = _block(_predicate(predicate, name), name)
        masks = np.broadcast_to(np.asarray(mask, dtype=np.int64) & FULL, p.shape)
        bits, base = _members(masks, active, name)
        warp_p = p[np.minimum(base[:, None] + np.arange(WARP), p.shape[0] - 1)]
        out = np.where(active, reduce(bits, warp_p & bits), 0).astype(dtype)
        return out[0] if uniform else out
    vote.__name__ = name
    return vote


def _ballot_bits(bits, chosen):
    return (chosen.astype(np.uint64) << np.arange(WARP, dtype=np.uint64)).sum(1, np.uint64)


MEANINGS = {
    "warp_reduce_sum": _butterfly("sum", np.add),
    "warp_reduce_max": _butterfly("max", FMAX),
    "warp_reduce_min": _butterfly("min", FMIN),
    "warp_reduce_bitand": _butterfly("bitand", np.bitwise_and),
    "warp_reduce_bitor": _butterfly("bitor", np.bitwise_or),
    "shfl_xor": _shuffle("shfl_xor", _xor),
    "shfl_down": _shuffle("shfl_down", _down),
    "shfl_up": _shuffle("shfl_up", _up),
    "shfl_sync": _shuffle("shfl_sync", _idx),
    "any_sync": _vote("any_sync", lambda bits, p: p.any(1), np.int32),
    "all_sync": _vote("all_sync", lambda bits, p: (p == bits).all(1), np.int32),
    "ballot_sync": _vote("ballot_sync", _ballot_bits, np.uint64),
}


def _match_bits(value, name):
    """The bits of a match's value: an integer or float of 32 or 64 bits."""
    array = np.asarray(value)
    if array.dtype.kind in "iub" and array.dtype.itemsize < 4:
        array = array.astype(np.int32)      # as the compiler widens it (sign or zero)
    if array.dtype.kind not in "iuf" or array.dtype.itemsize not in (4, 8):
        if type(value) is int:
            array = np.asarray(value, np.int64 if not -2**31 <= value < 2**31 else np.int32)
        elif type(value) is float:
            array = np.asarray(value, np.float32)
        else:
            raise TypeError(f"T.{name} takes an integer or float of 32 or 64 bits, got "
                            f"{array.dtype}")
    return array.view(f"u{array.dtype.itemsize}")


def _match(name, all_lanes):
    def match(value, mask=FULL):
        v, active, uniform = _block(_match_bits(value, name), name)
        masks = np.broadcast_to(np.asarray(mask, dtype=np.int64) & FULL, v.shape)
        bits, base = _members(masks, active, name)
        lanes = np.minimum(base[:, None] + np.arange(WARP), v.shape[0] - 1)
        same = (v[lanes] == v[:, None]) & bits
        if all_lanes:
            out = np.where((same == bits).all(1), masks, 0)
        else:
            out = (same.astype(np.uint64) << np.arange(WARP, dtype=np.uint64)).sum(1, np.uint64)
        out = np.where(active, out, 0).astype(np.uint32)
        return out[0] if uniform else out
    match.__name__ = name
    return match


def sync_warp(mask=FULL):
    """``__syncwarp``: its lanes checked as a vote's; the simulated lanes run in step."""
    _, active, _ = _block(0, "sync_warp")
    _members(np.broadcast_to(np.asarray(mask, dtype=np.int64) & FULL, active.shape), active,
             "sync_warp")
    synced()


MEANINGS["sync_warp"] = sync_warp
MEANINGS["match_any_sync"] = _match("match_any_sync", all_lanes=False)
MEANINGS["match_all_sync"] = _match("match_all_sync", all_lanes=True)


def ballot(predicate):
    """``T.ballot_sync`` with the full mask."""
    return MEANINGS["ballot_sync"](_predicate(predicate, "ballot"))


def activemask():
    """The lanes of each warp that run the call, as a uint64."""
    _, active, uniform = _block(0, "activemask")
    lanes = active.shape[0]
    if lanes % WARP:
        raise ThreadCodeError(f"T.activemask needs whole warps, and the block has {lanes} "
                              f"threads{_caller_location(2)}")
    warps = active.reshape(-1, WARP).astype(np.uint64) << np.arange(WARP, dtype=np.uint64)
    out = np.repeat(warps.sum(1, np.uint64), WARP)
    out = np.where(active, out, np.uint64(0)).astype(np.uint64)
    return out[0] if uniform else out


def _predicate_barrier(name, reduce):
    def barrier(predicate):
        p, active, uniform = _block(_predicate(predicate, name), name)
        if not np.all(active):
            raise ThreadCodeError(
                f"T.{name} inside a branch that depends on the thread index: it is a block "
                f"barrier, and every thread of the block must reach it{_caller_location(2)}")
        out = np.full(p.shape, reduce(p), dtype=np.int32)
        return out[0] if uniform else out
    barrier.__name__ = name
    return barrier


def _ffs(value):
    x = np.asarray(value)
    if x.dtype.kind not in "biu":
        raise TypeError(f"T.__ffs: expected an integer, got {x.dtype}")
    x = x.astype(np.int64).astype(np.uint64)       # the lowest set bit survives widening
    out = np.zeros(x.shape, dtype=np.int32)
    for b in range(63, -1, -1):
        out = np.where((x >> np.uint64(b)) & np.uint64(1), np.int32(b + 1), out)
    return out.astype(np.int32)[()] if out.ndim == 0 else out.astype(np.int32)


def _fns_one(mask, base, offset):
    """PTX ``fns.b32`` for one lane: the ``|offset|``-th set bit of ``mask`` from bit
    ``base`` (up for offset > 0, down for offset < 0; offset 0: ``base`` itself if set)."""
    mask, base, offset = int(mask) & FULL, int(base) & FULL, int(np.int32(np.int64(offset)))
    if offset == 0:
        return base if base < 32 and mask >> base & 1 else FULL
    step, count, pos = (1 if offset > 0 else -1), abs(offset), base
    while 0 <= pos < 32:
        if mask >> pos & 1:
            count -= 1
            if count == 0:
                return pos
        pos += step
    return FULL


def _fns(mask, base, offset):
    for v in (mask, base, offset):
        if np.asarray(v).dtype.kind not in "biu":
            raise TypeError(f"T.__fns: expected integers, got {np.asarray(v).dtype}")
    out = np.vectorize(_fns_one, otypes=[np.uint32])(mask, base, offset)
    return out[()] if out.ndim == 0 else out


MEANINGS.update(
    ballot=ballot, activemask=activemask,
    syncthreads_count=_predicate_barrier("syncthreads_count", lambda p: np.count_nonzero(p)),
    syncthreads_and=_predicate_barrier("syncthreads_and", lambda p: int(np.all(p))),
    syncthreads_or=_predicate_barrier("syncthreads_or", lambda p: int(np.any(p))),
    __ffs=_ffs, __fns=_fns)

"""Per-thread code in the simulator: kernels that read their thread index
(``T.get_thread_binding``, ``T.thread_binding``).

On the GPU every statement outside a ``T.Parallel`` runs in every thread of the block;
code that reads the thread index (``tx = T.get_thread_binding()``) computes a different
value in each. The simulator runs such a kernel's block **lane-wise**, as it runs a
``T.Parallel`` body: the thread index is the array of all the block's thread indices
(``thread_index``), every value computed from it is an array over the threads, an
``if`` on it runs under a mask of the threads it applies to, and each statement is done
by all the threads before the next begins. That is the meaning of a program whose
threads exchange values through shared memory only across the block barriers tilejit
inserts (``passes/barriers.py``); a program whose threads race gets one of the GPU's
possible outcomes.

- Tile operations (``T.copy``, ``T.gemm``, reductions, ``T.Parallel`` loops) are the
  block's: they run once, and only where every thread reaches them (``block_wide``);
  under a branch that some threads skip they are a ``ThreadCodeError``, but for a
  ``T.copy``, ``T.fill`` / ``T.clear`` or ``T.Parallel`` on shared tiles and tensors
  under a branch that a contiguous range of threads takes: those threads do it (as
  TileLang maps it onto them; ``passes/thread_ranges.py``), once.
- ``T.alloc_local`` tiles are each thread's own (``LaneTensor``: one copy per thread);
  ``T.alloc_var`` scalars are names, arrays over the threads once a thread-dependent
  value is assigned. A per-thread tile is indexed element by element (and filled or
  cleared); handing it to a block-wide operation is a ``ThreadCodeError``.
- Loop bounds and ``while`` conditions must be the same in every thread (``uniform``);
  so must the condition of an ``if`` whose branch leaves a loop (``break``,
  ``continue``) or the kernel (``return``).
- An element atomic outside a ``T.Parallel`` is done by every thread (as on the GPU in
  such a kernel: ``frontend/tile_operands.py``).
- A statement that indexes a shared tile at a thread-dependent index is one step
  (``step``): an element that one thread writes and another reads or writes in the same
  statement (``S[tx] = S[tx + 1]``) is a ``RaceError``, since no barrier can come between
  the halves of one statement; the lanes' order would hide it. A branch on the thread
  index holding per-thread code only is one step as a whole (``region``): the compiler
  puts no barrier inside it.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from tilejit.sim import garbage
from tilejit.sim.runtime import STATE, SimTensor, _caller_location


class ThreadCodeError(RuntimeError):
    """Per-thread code (reading the thread index) the simulator cannot run lane-wise."""


def thread_index():
    """The block's thread indices, one lane each (what ``%tid.x`` is in each thread)."""
    if STATE.in_parallel == 1 and STATE.iteration_threads is not None:
        # one iteration per thread (runtime._block_loop): iteration k's thread is k
        each = STATE.iteration_threads
        first = STATE.role * each.size if STATE.roles is not None else 0
        loop = STATE.parallel
        if loop is not None and loop.lane is not None:     # the scalar loop: this one
            return np.int64(first + each.reshape(-1)[loop.lane])
        return first + each
    if STATE.in_parallel:
        raise ThreadCodeError(
            f"the thread index (T.get_thread_binding, T.get_lane_idx, ...) read inside a "
            f"T.Parallel loop: which thread runs an iteration is the compiler's layout's "
            f"choice (not supported in simulation); read it outside the loop, or index "
            f"by the loop's variables{_caller_location(2)}")
    first = STATE.role * STATE.lanes if STATE.roles is not None else 0
    return np.arange(first, first + STATE.lanes, dtype=np.int64)


def _active():
    """The active threads (a boolean array), or None when all are."""
    mask = STATE.mask
    if mask is None or np.ndim(mask) == 0:
        return None if mask is None or bool(mask) else np.zeros(STATE.lanes, dtype=bool)
    return mask


def varies(value) -> bool:
    """Whether ``value`` differs between the active threads."""
    if np.ndim(value) == 0:
        return False
    array = np.asarray(value)
    active = _active()
    seen = array if active is None else array[np.broadcast_to(active, array.shape)]
    return seen.size > 0 and not np.all(seen == seen.reshape(-1)[0])


def varies_any(values) -> bool:
    """Whether any of ``values`` differs between the active threads."""
    return any(varies(v) for v in values)


def uniform_all(values, what: str) -> list:
    return [uniform(v, what) for v in values]


def _range_bounds(bounds):
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (
        (bounds[0], bounds[1], 1) if len(bounds) == 2 else tuple(bounds))
    step = uniform(step, "a loop's step")
    if step == 0:
        raise ValueError(f"range() arg 3 must not be zero{_caller_location(3)}")
    return start, stop, step


def lane_range(*bounds):
    """``range(*bounds)`` with bounds that differ between the active threads (a
    per-thread trip count, ``T.serial(tx % 4)``; the step is one for all): the longest
    active thread's iterations, each value a thread's own (start + i * step), the threads
    already past their own stop masked out by ``lane_live``."""
    start, stop, step = _range_bounds(bounds)
    start = np.broadcast_to(np.asarray(start, dtype=np.int64), (STATE.lanes,))
    stop = np.broadcast_to(np.asarray(stop, dtype=np.int64), (STATE.lanes,))
    trips = np.maximum(0, -((start - stop) // step) if step > 0 else -((stop - start) // -step))
    active = _active()
    if active is not None:
        trips = np.where(np.broadcast_to(active, trips.shape), trips, 0)
    for i in range(int(trips.max()) if trips.size else 0):
        yield start + i * step


def lane_live(k, *bounds):
    """The threads whose own range ``bounds`` holds ``k`` (``lane_range``'s value)."""
    _, stop, step = _range_bounds(bounds)
    return k < stop if step > 0 else k > stop


def leave(lanes_on):
    """``lanes_on`` (``True``: every lane) less the active lanes: those that take a
    ``continue`` or ``break`` (``lane_loops.py``)."""
    on = np.ones(STATE.lanes, dtype=bool) if lanes_on is True else \
        np.array(lanes_on, dtype=bool)
    active = _active()
    if active is None:
        on[...] = False
    else:
        on &= ~np.broadcast_to(active, on.shape)
    return on


def any_on(lanes_on) -> bool:
    """Whether an active lane is among ``lanes_on`` (``True``/``False``: all, none)."""
    if lanes_on is True or lanes_on is False:
        return lanes_on and (STATE.mask is None or bool(np.any(STATE.mask)))
    active = _active()
    return bool(np.any(lanes_on if active is None else lanes_on & active))


def loop_on(test, still):
    """The lanes that run a ``while`` loop's next iteration: those still in it whose
    ``test`` holds (a lane whose test fails has left the loop)."""
    if np.ndim(test) == 0:
        return still if bool(test) else False
    holds = np.asarray(test, dtype=bool)
    return holds if still is True else holds & still


def uniform(value, what: str):
    """``value`` as one Python value: it must be the same in every active thread."""
    if np.ndim(value) == 0:
        return value.item() if isinstance(value, np.generic) else value
    array = np.asarray(value)
    active = _active()
    seen = array if active is None else array[np.broadcast_to(active, array.shape)]
    if seen.size == 0:
        seen = array
    first = seen.reshape(-1)[0]
    if not np.all(seen == first):
        raise ThreadCodeError(
            f"{what} differs between the block's threads (it depends on the thread index); "
            f"the simulator runs a block's threads together and needs it to be the same in "
            f"all of them: not supported in simulation{_caller_location(2)}")
    return first.item()


@contextmanager
def step():
    """One statement of per-thread code that indexes a tile: its shared-tile accesses at
    thread-dependent indices are checked for races between threads (``races.ThreadStep``).
    Inside a ``region`` the statement is part of the region's step."""
    from tilejit.sim.races import ThreadStep        # races.py imports runtime, as we do
    if STATE.thread_region:
        yield
        return
    outer, STATE.parallel = STATE.parallel, ThreadStep(STATE.lanes)
    try:
        yield
    finally:
        STATE.parallel = outer


@contextmanager
def region(*tests):
    """A branch whose test depends on the thread index, or a loop whose bounds do,
    holding per-thread code only (the transform checks that): the compiler puts no
    barrier inside it (the threads that skip it would never reach one) and counts its
    shared-memory accesses as one statement's (``passes/barriers.py``), so its statements
    are one step here: an element one thread writes and another reads or writes anywhere
    in it is a race (``races.ThreadRegion``). A named barrier or ``T.sync_warp`` inside
    starts a new step (``synced``). A test that is one value in every thread is no
    region."""
    from tilejit.sim.races import ThreadRegion      # races.py imports runtime, as we do
    if STATE.thread_region or STATE.in_parallel or not any(np.ndim(t) for t in tests):
        yield
        return
    outer, STATE.parallel = STATE.parallel, ThreadRegion(STATE.lanes)
    STATE.thread_region = True
    try:
        yield
    finally:
        STATE.parallel = outer
        STATE.thread_region = False


def synced():
    """A barrier of some of the block's threads (a named barrier, ``T.sync_warp``) inside
    a ``region``: the accesses before it are ordered with those after it (for the threads
    it holds: the others' are not tracked further, which can hide a race, never make
    one up)."""
    if STATE.thread_region:
        from tilejit.sim.races import ThreadRegion  # races.py imports runtime, as we do
        STATE.parallel = ThreadRegion(STATE.lanes)


# what a range of the block's threads may do by itself (``passes/thread_ranges.py``)
RANGE_OPS = ("copy", "fill", "Parallel")


def _a_range(active) -> bool:
    """Whether the active threads are one contiguous range of the block's."""
    on = np.flatnonzero(active)
    return on.size > 0 and on[-1] - on[0] + 1 == on.size


def block_wide(name: str, args=()):
    """Before a tile operation in a kernel that reads its thread index: every thread
    must reach it (or, for a T.copy, T.fill / T.clear or T.Parallel on shared tiles and
    tensors, a contiguous range of them: then those threads do all of it, once), and its
    operands must be the block's tiles."""
    active = _active()
    if active is not None and not np.all(active) and not (
            name in RANGE_OPS and _a_range(active) and not any(
                getattr(getattr(a, "tensor", a), "kind", None) in ("fragment", "local")
                for a in args)):
        raise ThreadCodeError(
            f"T.{name} inside a branch that depends on the thread index: a tile operation "
            f"is done by the whole block, and here only some threads reach it (not "
            f"supported in simulation; on the GPU the other threads' share is not "
            f"done){_caller_location(3)}")
    for a in args:
        t = getattr(a, "tensor", a)
        if isinstance(t, LaneTensor):
            raise ThreadCodeError(
                f"T.{name} on {t.name}, a T.alloc_local tile of a kernel that reads its "
                f"thread index: each thread has its own copy, and a tile operation is the "
                f"block's; index it element by element (not supported in "
                f"simulation){_caller_location(3)}")


class LaneTensor(SimTensor):
    """A ``T.alloc_local`` tile of a kernel with per-thread code: one copy per thread.
    ``data`` holds them all (the thread first); indexing picks each thread's own."""

    __slots__ = ()

    def __init__(self, shape, storage, dtype, name):
        super().__init__(garbage.fill((STATE.lanes,) + tuple(shape), storage), dtype, name,
                         "local")

    @property
    def shape(self):
        return self.data.shape[1:]

    @property
    def ndim(self):
        return self.data.ndim - 1

    def _indices(self, index):
        if STATE.in_parallel:
            raise ThreadCodeError(
                f"{self.name}, a T.alloc_local tile of a kernel that reads its thread "
                f"index, used in a T.Parallel loop: each thread has its own copy, and the "
                f"loop's iterations are spread over the threads (not supported in "
                f"simulation){_caller_location(3)}")
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.data.ndim - 1:
            raise IndexError(f"{self.name}: a {self.data.ndim - 1}-d tile indexed with "
                             f"{len(idx)} index(es){_caller_location(3)}")
        return (np.arange(STATE.lanes, dtype=np.int64),) + idx      # each lane its own

    def _element(self, first) -> tuple:
        # (the first index is the thread's copy: the tile's own index and shape without it)
        thread = first[0] + (STATE.role * STATE.lanes if STATE.roles is not None else 0)
        return (f"{self.name}[{', '.join(map(str, first[1:]))}]", tuple(self.shape),
                f"thread {thread}'s ")

    def fill(self, value, store):
        """Every element of the active threads' copies."""
        active = _active()
        if active is None:
            self.data[...] = store(value)
            self.wrote()
            return
        self.data[active] = store(value)
        if self.unwritten is not None:
            self.unwritten[active] = False
            if not self.unwritten.any():
                self.unwritten = None

"""Named barriers in the simulator: ``T.sync_threads(barrier_id, arrive_count)`` and
``T.named_barrier_arrive(barrier_id, arrive_count)``.

On the GPU named barrier ``id`` completes when ``arrive_count`` threads have arrived,
those that wait (``bar.sync``) and those that only arrive (``bar.arrive``); the waiters
then go on, seeing what every arriving thread wrote before it arrived.

- **Between ``T.ws`` warpgroup roles** (``roles.py``) a named barrier is a barrier of the
  block's like an mbarrier whose phases count arrivals: a role arrives as its 128
  threads, and a ``T.sync_threads`` waits for the phase it arrived in to complete (the
  other roles take their turns meanwhile). When no role can go on, the ``DeadlockError``
  names the barrier and each role's line, as for mbarriers.
- **In per-thread code** (``threads.py``: the block runs lane-wise, all its threads
  statement by statement) only ``T.sync_threads`` is meaningful. Each barrier id must be
  reached by exactly ``arrive_count`` threads, in whole warps: then it completes where the
  simulator already has them together. Fewer would wait forever on the GPU, more is
  undefined: a ``ThreadCodeError`` (so is a barrier that the threads of two branches
  complete together, which runs on the GPU but is not modelled: the simulator runs one
  branch's threads at a time). The threads that use an id must stay the same until the
  block's next ``T.sync_threads()``: two groups on one id at once mix their arrivals on
  the GPU (the barriers tilejit inserts itself are not seen here, so an id handed to
  another group needs ``T.sync_threads()`` between the two). An arrival that does not
  wait (``T.named_barrier_arrive``) orders threads that run different statements at once,
  which lane-wise execution cannot: a ``ThreadCodeError`` there, not modelled.
- **In the block's own code** every thread reaches it: ``arrive_count`` must be the
  block's threads.

The ids and counts are checked as the compiler checks constants
(``tiles.check_named_barrier``).
"""
from __future__ import annotations

import numpy as np

from tilejit.language.tiles import check_named_barrier
from tilejit.sim.roles import _Barrier
from tilejit.sim.runtime import STATE, _caller_location
from tilejit.sim.threads import ThreadCodeError, _active, synced


def _plain(value):
    """A numpy scalar (or 0-d array) as its Python value; anything else as it is."""
    if isinstance(value, (np.integer, np.bool_)) or (np.ndim(value) == 0 and
                                                     isinstance(value, np.ndarray)):
        return value.item()
    return value


def _check(what, barrier_id, arrive_count):
    block = STATE.threads
    ids = np.asarray(barrier_id)
    for b in (np.unique(ids).tolist() if ids.ndim else [_plain(barrier_id)]):
        problem = check_named_barrier(what, b, _plain(arrive_count), block)
        if problem:
            raise ValueError(problem + _caller_location(3))
    if arrive_count is None:
        return block
    if np.ndim(arrive_count):
        raise ThreadCodeError(f"{what}: arrive_count differs between the block's threads; "
                              f"the simulator needs it the same in every thread: not "
                              f"supported in simulation{_caller_location(3)}")
    return int(_plain(arrive_count))


def sync_threads_named(barrier_id, arrive_count=None):
    what = f"T.sync_threads({barrier_id!r}, {arrive_count!r})"
    count = _check(what, barrier_id, arrive_count)
    if STATE.roles is not None:
        _role_arrival(what, barrier_id, count, wait=True)
    elif STATE.lanes:
        _lanes_arrival(what, barrier_id, count)
        synced()
    elif count != STATE.threads:
        raise ThreadCodeError(f"{what}: every one of the block's {STATE.threads} threads "
                              f"reaches it, and it expects {count} (on the GPU: undefined)"
                              f"{_caller_location(2)}")


def named_barrier_arrive(barrier_id, arrive_count):
    what = f"T.named_barrier_arrive({barrier_id!r}, {arrive_count!r})"
    count = _check(what, barrier_id, arrive_count)
    if STATE.roles is not None:
        _role_arrival(what, barrier_id, count, wait=False)
        return
    raise ThreadCodeError(f"{what}: an arrival that does not wait is modelled between a "
                          f"kernel's T.ws warpgroup roles only (the simulator runs the "
                          f"block's other threads statement by statement together): not "
                          f"supported in simulation{_caller_location(2)}")


def _users() -> dict:
    """{id: the threads that last synced on it} since the block's last barrier of all
    its threads (``T.sync_threads()``; the runner starts each block with none)."""
    return STATE.named_users


def block_barrier() -> None:
    """A barrier of every thread of the block: a named barrier's next users start anew."""
    _users().clear()


def _lanes_arrival(what, barrier_id, count):
    """Per-thread code: the threads at this statement, grouped by id, are ``count``
    whole warps each, and the same threads that last used the id (another group using
    it before a barrier of the whole block would mix its arrivals with theirs on the
    GPU, where the two groups run at once)."""
    lanes = STATE.lanes
    active = _active()
    active = np.ones(lanes, bool) if active is None else np.asarray(active, bool)
    ids = np.broadcast_to(np.asarray(barrier_id), (lanes,))
    users = _users()
    for b in np.unique(ids[active]).tolist():
        group = active & (ids == b)
        before = users.get(b)
        if before is not None and not np.array_equal(before, group):
            first, other = int(np.flatnonzero(group)[0]), int(np.flatnonzero(before)[0])
            raise ThreadCodeError(f"{what}: threads from {first} sync on named barrier {b}, "
                                  f"which other threads (from {other}) used since the block's "
                                  f"last barrier of all its threads: on the GPU the two "
                                  f"groups' arrivals mix in one phase; give each group its "
                                  f"own id{_caller_location(3)}")
        users[b] = group
        n = int(group.sum())
        warps = group.reshape(-1, 32) if lanes % 32 == 0 else group[None]
        partial = (warps.any(1) & ~warps.all(1)).nonzero()[0]
        if partial.size:
            raise ThreadCodeError(f"{what}: warp {int(partial[0])} reaches named barrier {b} "
                                  f"with only some of its threads; a named barrier counts "
                                  f"whole warps{_caller_location(3)}")
        if n != count:
            first = int(np.flatnonzero(group)[0])
            why = ("on the GPU they wait forever unless other threads arrive from another "
                   "branch at the same time, which the simulator, running a branch's threads "
                   "together, does not model" if n < count else "on the GPU: undefined")
            raise ThreadCodeError(f"{what}: {n} threads (from thread {first}) reach named "
                                  f"barrier {b}, which waits for {count}: {why}"
                                  f"{_caller_location(3)}")


def _role_arrival(what, barrier_id, count, wait):
    """Between warpgroup roles: the role arrives as its threads; a sync waits for the
    phase to complete."""
    if np.ndim(barrier_id):
        raise ThreadCodeError(f"{what}: barrier_id differs between a role's threads: not "
                              f"supported in simulation{_caller_location(3)}")
    size = STATE.role_threads
    active = _active() if STATE.lanes else None
    if active is not None and not np.all(active):
        raise ThreadCodeError(f"{what}: some threads of warpgroup role {STATE.role} reach it "
                              f"and others do not; the simulator has a role arrive as a "
                              f"whole: not supported in simulation{_caller_location(3)}")
    if count % size:
        raise ThreadCodeError(f"{what}: in the simulator a warpgroup role arrives as its "
                              f"{size} threads; give the barrier a count of whole "
                              f"roles: not supported in simulation{_caller_location(3)}")
    roles, b_id = STATE.roles, int(_plain(barrier_id))
    named = roles.named_barriers
    b = named.get(b_id)
    if b is None or (b.pending == b.count and b.count != count):
        b = named[b_id] = _Barrier(f"named barrier {b_id}", count) if b is None else b
        b.count = b.pending = count
    elif b.count != count:
        raise ThreadCodeError(f"{what}: named barrier {b_id} is waiting for {b.count} "
                              f"arrivals in this phase; this arrival counts {count} "
                              f"(on the GPU: undefined){_caller_location(3)}")
    if size > b.pending:
        raise ThreadCodeError(f"{what}: named barrier {b_id} has {b.pending} of its {count} "
                              f"arrivals left in this phase, and warpgroup role {STATE.role} "
                              f"arrives as {size} (on the GPU: undefined)"
                              f"{_caller_location(3)}")
    roles.clocks.release(b.phase_clock(roles.nroles))
    phase = b.phase
    b.pending -= size
    if b.pending == 0:
        b.complete()
    if wait:
        # released when the phase it arrived in completes, however many more complete
        # before it runs again (a named barrier wakes its waiters; no parity to miss)
        if b.phase <= phase:
            roles.wait(_PhaseDone(b, phase), phase & 1, _caller_location(3))
        b.acquire(phase & 1)


class _PhaseDone:
    """What a role waits on at a named barrier: phase ``phase`` of ``barrier`` completed
    (``roles.BlockRoles.wait`` asks ``passed``; its deadlock report ``describe``)."""

    def __init__(self, barrier, phase):
        self.barrier, self.phase = barrier, phase

    def passed(self, parity) -> bool:
        return self.barrier.phase > self.phase

    def describe(self) -> str:
        return self.barrier.describe()

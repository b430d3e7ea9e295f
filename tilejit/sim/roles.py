"""mbarriers, ``T.tma_copy`` and warpgroup roles (``with T.ws(k):``) in the simulator.

**mbarriers** (PTX ISA, "Parallel Synchronization and Communication Instructions:
mbarrier"). Each barrier counts the arrivals of its current phase; when its count have
arrived the phase completes and the next begins. ``T.mbarrier_wait_parity(b, q)``
returns once the phase of parity q has completed: with p phases completed, parity
``(p - 1) & 1`` passes at once and ``p & 1`` waits for phase p. In the simulator a
whole warpgroup role arrives at once (128 threads; without ``T.ws`` roles, the whole
block), so a barrier's count is the number of threads that arrive on it per phase.

**TMA loads.** ``T.tma_copy(src, dst, barrier=b)`` (global → shared) adds its bytes to
b's current phase and does not wait; its data lands in ``dst`` when that phase
completes, so a consumer that reads ``dst`` without waiting reads the old contents (or
is told the tile is unwritten), as on the GPU. A store (shared → global) is done at once.

**Roles.** A kernel with ``with T.ws(k):`` blocks runs each block as ``threads / 128``
roles, role k the threads 128k … 128k+127 (warps 4k … 4k+3), each a Python thread
running the whole block program, ``with T.ws`` bodies only in their roles. They take
turns: one role runs until it waits on a phase that has not completed, then the next
role that can run does (round-robin from it), so producers and consumers run to
completion deterministically. Shared tiles and barriers are the block's (the roles
share the objects the first role allocated); fragments, local tiles and scalars are each
role's. When no role can run and some wait, the block has deadlocked: a
``DeadlockError`` names each waiting role's line, never a hang. The order the turns
give may hide a race the kernel's mbarriers allow: ``races.py`` checks every shared-tile
access against the order the arrivals and waits guarantee (``RaceError``).
"""
from __future__ import annotations

import contextvars
import threading

import numpy as np

from tilejit.language.hopper import MAX_ARRIVALS, WARPGROUP_THREADS
from tilejit.sim.races import Clocks, SharedRaces
from tilejit.sim.runtime import (STATE, SimTensor, _caller_location, assigned_name,
                                 kernel_frame)
from tilejit.sim.semantics import _resolve, copy, tile_view
from tilejit.sim.threads import uniform



class DeadlockError(RuntimeError):
    """Every warpgroup role of a block waits on an mbarrier phase none of them can
    complete (on the GPU: a hang)."""


class _Aborted(BaseException):
    """Unwinds a role whose block failed in another role."""


class _Barrier:
    """One mbarrier: its expected count, the arrivals still pending in the current phase,
    the phases completed, and the TMA loads that land when the current phase completes."""

    __slots__ = ("name", "count", "pending", "phase", "landing", "clock", "done")

    def __init__(self, name, count):
        self.name, self.count, self.pending, self.phase = name, count, count, 0
        self.landing = []
        # with roles (races.py): the clock the current phase collects, and the clocks of
        # the last completed phase of each parity
        self.clock, self.done = None, [None, None]

    def passed(self, parity) -> bool:
        return (self.phase & 1) != parity

    def phase_clock(self, nroles):
        if self.clock is None:
            self.clock = np.zeros(nroles, np.int64)
        return self.clock

    def complete(self):
        landing, self.landing = self.landing, []
        quiet, STATE.quiet_races = STATE.quiet_races, True
        try:
            for item in landing:       # a TMA load's (src, dst), or cp.async copies
                if callable(item):
                    item()
                else:
                    copy(*item)
        finally:
            STATE.quiet_races = quiet
        self.done[self.phase & 1], self.clock = self.clock, None
        self.phase += 1
        self.pending = self.count

    def acquire(self, parity):
        """A wait on ``parity`` passed: the waiter learns what preceded that phase."""
        roles, done = STATE.roles, self.done[parity]
        if roles is not None and done is not None:
            roles.clocks.acquire(done)

    def describe(self) -> str:
        return (f"{self.name} (phase {self.phase}: {self.count - self.pending} of "
                f"{self.count} arrivals)")


class MBarriers:
    """What ``T.alloc_barrier`` gives: ``mbars[i]`` is barrier i; a single barrier
    (``T.alloc_barrier(128)``) may also be used directly."""

    def __init__(self, name, counts):
        self.name = name
        self.barriers = [_Barrier(f"{name}[{i}]" if len(counts) > 1 else name, c)
                         for i, c in enumerate(counts)]

    def __len__(self):
        return len(self.barriers)

    def __getitem__(self, i):
        # (an index of per-thread code, `kfree[k % n]` with k a loop over a thread's
        # T.alloc_var, is lanes: the same barrier in every active thread)
        i = int(uniform(i, f"the index of mbarrier array {self.name}"))
        if not 0 <= i < len(self.barriers):
            raise IndexError(f"{self.name}[{i}]: {self.name} holds {len(self.barriers)} "
                             f"mbarrier(s){_caller_location(2)}")
        return self.barriers[i]

    def __repr__(self):
        return f"<{len(self.barriers)} mbarrier(s) {self.name}>"


def _barrier(x, what) -> _Barrier:
    if isinstance(x, _Barrier):
        return x
    if isinstance(x, MBarriers) and len(x) == 1:
        return x.barriers[0]
    if isinstance(x, MBarriers):
        raise TypeError(f"{what}: mbarrier: {x.name} holds {len(x)} barriers; index it "
                        f"({x.name}[i]){_caller_location(3)}")
    raise TypeError(f"{what}: mbarrier: expected a barrier of T.alloc_barrier (mbars[i]), "
                    f"got {type(x).__name__} {x!r}{_caller_location(3)}")


def alloc_barrier(arrive_count):
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) \
                or not 1 <= c <= MAX_ARRIVALS:
            raise ValueError(f"T.alloc_barrier: arrive_count: expected an int in [1, "
                             f"{MAX_ARRIVALS}] (or a list of them), got {c!r}"
                             f"{_caller_location(2)}")
    frame = kernel_frame()
    name = (assigned_name(frame) if frame is not None else None) or "mbarrier"
    counts = [int(c) for c in counts]
    return _shared(lambda: MBarriers(name, counts), f"{name}: mbarriers{counts}")


def _shared(make, what):
    roles = STATE.roles
    return make() if roles is None else roles.shared(make, what)


def _arrivals(what) -> tuple[int, str]:
    """How many threads this arrival stands for, and who they are: the role's (or the
    block's) threads, or in per-thread code those of them the branches let through."""
    n = STATE.role_threads
    if not n:
        raise RuntimeError(f"{what} runs inside a simulated kernel")
    mask = STATE.mask
    if STATE.lanes and mask is not None and np.ndim(mask) > 0:
        on = np.flatnonzero(mask) + (STATE.role * n if STATE.roles is not None else 0)
        who = (f"threads {on[0]}-{on[-1]}" if on.size and on[-1] - on[0] + 1 == on.size
               else f"{on.size} threads")
        return int(on.size), who
    if STATE.roles is not None:
        k = STATE.role
        return n, f"warpgroup role {k} (threads {k * n}-{k * n + n - 1})"
    return n, f"the block's {n} threads"


def mbarrier_arrive(mbarrier, cta_id=None):
    what = "T.mbarrier_arrive"
    if cta_id is not None:
        raise NotImplementedError(f"{what}: cta_id (a peer CTA of a cluster) is not "
                                  f"supported, got {cta_id!r}{_caller_location(2)}")
    b = _barrier(mbarrier, what)
    n, who = _arrivals(what)
    if n == 0:
        return
    if n > b.pending:
        raise RuntimeError(f"{what}: {b.name} expects {b.count} arrivals per phase; {who} "
                           f"arrive at once with {b.pending} still pending in phase {b.phase} "
                           "(in the simulator a warpgroup role arrives as a whole: give the "
                           f"barrier a count of whole roles){_caller_location(2)}")
    if STATE.roles is not None:
        STATE.roles.clocks.release(b.phase_clock(STATE.roles.nroles))
    b.pending -= n
    if b.pending == 0:
        b.complete()


def mbarrier_wait_parity(mbarrier, parity):
    what = "T.mbarrier_wait_parity"
    b = _barrier(mbarrier, what)
    if isinstance(parity, bool) or not isinstance(parity, (int, np.integer)) \
            or parity not in (0, 1):
        raise ValueError(f"{what}: parity: expected 0 or 1, got {parity!r}"
                         f"{_caller_location(2)}")
    if b.passed(parity):
        b.acquire(int(parity))
        return
    location = _caller_location(2)
    roles = STATE.roles
    if roles is None:
        _arrivals(what)
        raise DeadlockError(f"{what}: deadlock: waits for the phase of parity {parity} of "
                            f"{b.describe()}, and no other warpgroup role runs in this kernel "
                            f"(it has no T.ws roles) to complete it{location}")
    roles.wait(b, int(parity), location)
    b.acquire(int(parity))


def tma_copy(src, dst, barrier=None):
    what = "T.tma_copy"
    (s_t, *_), (d_t, *_) = _resolve(src, dst, what)
    if s_t.kind is None and d_t.kind == "shared":
        if barrier is None:
            raise TypeError(f"{what}: barrier: a load (global → shared) needs the mbarrier "
                            f"its bytes arrive on (barrier=mbars[i]), got None"
                            f"{_caller_location(2)}")
        b = _barrier(barrier, what)
        roles = STATE.roles
        if roles is not None:       # the issuer writes the bytes now, as far as order goes
            view = tile_view(dst, what)
            if view.races is not None:
                view.races.write(None)
            roles.clocks.publish(b.phase_clock(roles.nroles))
        b.landing.append((src, dst))
        return
    if s_t.kind == "shared" and d_t.kind is None:
        copy(src, dst)
        return
    kind = lambda t: "global" if t.kind is None else t.kind  # noqa: E731
    raise TypeError(f"{what}: copies global → shared (a load) or shared → global (a store); "
                    f"got {kind(s_t)} {s_t.name} → {kind(d_t)} {d_t.name}{_caller_location(2)}")


def ws(*warp_group_idx):
    raise TypeError("T.ws is only meaningful as `with T.ws(k):` in a kernel's body (not in "
                    "a @T.macro or outside a kernel)")


class BlockRoles:
    """One block's warpgroup roles, run as threads that take turns (see the module's
    documentation)."""

    def __init__(self, nroles: int, block, kernel: str = "kernel",
                 size: int = WARPGROUP_THREADS):
        self.nroles, self.block, self.kernel = nroles, block, kernel
        self.size = size                    # a role's threads (a warpgroup, or 64 / 32)
        self.cond = threading.Condition()
        self.turn = 0
        self.done = [False] * nroles
        self.waits = [None] * nroles        # (barrier, parity, location) while waiting
        self.objects = []                   # the block's shared objects, in order
        self.failed = None
        self.aborted = False
        self.clocks = Clocks(nroles)        # the roles' vector clocks (races.py)
        self.named_barriers = {}            # id: _Barrier (named_barriers.py)

    # -- what the kernel's operations ask -----------------------------------------
    def in_role(self, ids) -> bool:
        for k in ids:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) \
                    or not 0 <= k < self.nroles:
                raise ValueError(f"T.ws: expected warpgroup indices in [0, {self.nroles}) "
                                 f"(the block's {self.nroles * self.size} threads are "
                                 f"{self.nroles} roles of {self.size}), got {k!r}"
                                 f"{_caller_location(2)}")
        return STATE.role in ids

    def shared(self, make, what):
        seq = STATE.shared_seq
        STATE.shared_seq += 1
        if seq < len(self.objects):
            obj, first = self.objects[seq]
            if first != what:
                raise RuntimeError(f"warpgroup role {STATE.role} allocates {what} where an "
                                   f"earlier role allocated {first}: every role must allocate "
                                   f"the block's shared tiles and barriers in the same order"
                                   f"{_caller_location(3)}")
            return obj
        obj = make()
        if isinstance(obj, SimTensor) and obj.kind == "shared":
            obj.races = SharedRaces(self.clocks, obj.name, obj.data.shape, self.nroles)
        self.objects.append((obj, what))
        return obj

    def wait(self, barrier, parity, location):
        k = STATE.role
        with self.cond:
            self.waits[k] = (barrier, parity, location)
            self._hand_over(k)
            self._await_turn(k)
            self.waits[k] = None

    # -- scheduling --------------------------------------------------------------
    def _runnable(self, j) -> bool:
        if self.done[j]:
            return False
        w = self.waits[j]
        return w is None or w[0].passed(w[1])

    def _hand_over(self, k):
        """Give the turn to the next role that can run (k itself last), or fail."""
        for step in range(1, self.nroles + 1):
            j = (k + step) % self.nroles
            if self._runnable(j):
                self.turn = j
                self.cond.notify_all()
                return
        if all(self.done):
            return
        raise DeadlockError(self._deadlock())

    def _await_turn(self, k):
        while self.turn != k and not self.aborted:
            self.cond.wait()
        if self.aborted:
            raise _Aborted()

    def _deadlock(self) -> str:
        lines = [f"deadlock in {self.kernel}, block {self.block}: every warpgroup role waits "
                 "on a barrier phase (an mbarrier's or a named barrier's) that no role can "
                 "complete (on the GPU the kernel would hang)"]
        for j in range(self.nroles):
            who = f"role {j} (threads {j * self.size}-{(j + 1) * self.size - 1})"
            if self.done[j]:
                lines.append(f"{who} has finished")
                continue
            barrier, parity, location = self.waits[j]
            lines.append(f"{who} waits for the phase of parity {parity} of "
                         f"{barrier.describe()}{location}")
        return "\n".join(lines)

    def _role(self, k, fn, args, grid, threads, launch):
        state = STATE
        state.block, state.mask, state.grid, state.threads = self.block, None, grid, threads
        # the launch's place as the block's thread has it: its cluster, safe memory access,
        # tensor cores, laid-out tensors and multicasts, and the blocks ordered by an
        # acquire or a cluster barrier (block_races.py: one role's acquire orders every
        # role's accesses after it)
        (state.cluster, state.safe_memory, state.tensor_cores, state.laid_out,
         state.multicasts, state.block_acquired, state.cluster_waited) = launch
        state.roles, state.role, state.role_threads = self, k, self.size
        # a kernel that reads its thread index runs each role lane-wise over its own
        # warpgroup's threads (sim/threads.py: the index is the block's, 128 k + lane)
        state.lanes = self.size if getattr(fn, "per_thread", False) else 0
        state.in_parallel = 0
        state.shared_seq = 0
        state.cp_async = None       # no copies in flight (async_copies.py)
        try:
            with self.cond:
                self._await_turn(k)
            with np.errstate(all="ignore"):
                fn(*args)
            with self.cond:
                self.done[k] = True
                self._hand_over(k)
                self.cond.notify_all()
        except _Aborted:
            pass
        except BaseException as e:      # noqa: BLE001 - re-raised by run()
            with self.cond:
                if self.failed is None:
                    self.failed = e
                self.aborted = True
                self.cond.notify_all()

    def run(self, fn, args, grid, threads):
        launch = (STATE.cluster, STATE.safe_memory, STATE.tensor_cores, STATE.laid_out,
                  STATE.multicasts, STATE.block_acquired, STATE.cluster_waited)
        workers = [threading.Thread(target=contextvars.copy_context().run,   # (the launch's)
                                    args=(self._role, k, fn, args, grid, threads, launch),
                                    name=f"tilejit-sim-role-{k}", daemon=True)
                   for k in range(self.nroles)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if self.failed is not None:
            raise self.failed


def run_block_roles(fn, args, block, grid, threads):
    """Run one block of a kernel with ``T.ws`` roles: ``threads / 128`` roles (or of the
    front end's narrower roles, ``fn.role_threads``)."""
    size = getattr(fn, "role_threads", 0) or WARPGROUP_THREADS
    if threads % size:
        raise ValueError(f"T.ws: a kernel with warpgroup roles needs threads a multiple of "
                         f"{size}, got threads={threads}")
    BlockRoles(threads // size, block, fn.__name__, size).run(fn, args, grid, threads)


# the meanings of the language's declarations (``language/hopper.py``)
def fence_proxy_async():
    """No proxies here: nothing to order."""


def pdl():
    """The blocks of one launch run before the next launch's: nothing to trigger or
    wait for."""


MEANINGS = {"fence_proxy_async": fence_proxy_async, "pdl_trigger": pdl, "pdl_sync": pdl,
            "alloc_barrier": alloc_barrier,
            "mbarrier_arrive": mbarrier_arrive, "mbarrier_wait_parity": mbarrier_wait_parity,
            "tma_copy": tma_copy, "ws": ws}

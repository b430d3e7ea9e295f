"""Races between warpgroup roles on shared tiles, found in simulation.

In a kernel with ``with T.ws(k):`` roles the kernel orders the roles' shared-memory
accesses itself, with mbarriers (the compiler's barriers order only the threads of one
role). Two accesses of one element by different roles, one a write, that no chain of
mbarrier arrivals and waits orders are a race: on the GPU the read sees either value,
or a TMA load overwrites a stage a consumer is still reading. The simulator runs the
roles in turns (``roles.py``), in an order that may hide the race, so it checks the
order the kernel's synchronization guarantees instead, with vector clocks:

- each role r has a clock ``C_r`` (one count per role); its accesses happen at epoch
  ``C_r[r]``;
- an arrival on an mbarrier joins ``C_r`` into the barrier's current phase, then
  advances ``C_r[r]``; a TMA load joins its issuer's clock too (its bytes complete the
  phase);
- a wait that passes a phase joins that phase's clock into the waiter's.

Role s knows role r's accesses up to epoch ``C_s[r]``. Each element of a shared tile
keeps its last writer (role, epoch, line) and, per role, the epoch and line of its last
read. A read by s of an element role r wrote at an epoch s does not know, a write over
an unknown write, or a write over an unknown read is a ``RaceError`` naming the tile, the
element, both roles and both lines. A TMA load's bytes are the issuer's write at the
issue (``T.tma_copy``), though they land when the phase completes. Only accesses inside
``with T.ws`` bodies are checked: the statements outside them run in every role, and the
compiler's barriers order them with the role bodies (``passes/barriers.py``).
"""
from __future__ import annotations

import numpy as np

from tilejit.sim.runtime import STATE, _caller_location, format_location, kernel_frame


class RaceError(RuntimeError):
    """Two warpgroup roles access one shared-tile element, one of them writing, with no
    mbarrier arrival and wait ordering them (on the GPU: either order, or both at once)."""


class Clocks:
    """The roles' vector clocks and the lines their accesses were made at."""

    def __init__(self, nroles: int):
        self.of = [np.zeros(nroles, np.int64) for _ in range(nroles)]
        for r in range(nroles):
            self.of[r][r] = 1
        self.lines = [None]          # location id -> (filename, line)
        self._ids = {}

    def location(self) -> int:
        frame = kernel_frame(1)
        key = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
        if key not in self._ids:
            self._ids[key] = len(self.lines)
            self.lines.append(key)
        return self._ids[key]

    def describe(self, loc: int) -> str:
        key = self.lines[loc]
        return "" if key is None else format_location(*key)

    # -- synchronization ------------------------------------------------------------
    def release(self, into: np.ndarray) -> None:
        """This role's clock joined into ``into`` (a barrier phase's), then advanced."""
        mine = self.of[STATE.role]
        np.maximum(into, mine, out=into)
        mine[STATE.role] += 1

    def publish(self, into: np.ndarray) -> None:
        """A TMA load issued now: its issuer's clock joined into the phase it completes."""
        np.maximum(into, self.of[STATE.role], out=into)

    def acquire(self, clock: np.ndarray) -> None:
        mine = self.of[STATE.role]
        np.maximum(mine, clock, out=mine)


class SharedRaces:
    """The happens-before record of one shared tile's elements (or, for a stage
    ``A_s[k % 2, :, :]``, a view of the tile's record)."""

    __slots__ = ("clocks", "name", "w_role", "w_epoch", "w_loc", "r_epoch", "r_loc",
                 "origin")

    def __init__(self, clocks: Clocks, name: str, shape=None, nroles=0, arrays=None,
                 origin=None):
        self.clocks, self.name = clocks, name
        if arrays is None:
            arrays = (np.full(shape, -1, np.int8), np.zeros(shape, np.int64),
                      np.zeros(shape, np.int32), np.zeros((nroles,) + tuple(shape), np.int64),
                      np.zeros((nroles,) + tuple(shape), np.int32))
        self.w_role, self.w_epoch, self.w_loc, self.r_epoch, self.r_loc = arrays
        # per dimension of the tile: the element a view fixes (int) or where its range
        # starts (slice), to name an element of a view by its place in the tile
        self.origin = origin or tuple(slice(0, None) for _ in self.w_role.shape)

    def view(self, index) -> "SharedRaces":
        every = (slice(None),) + index
        origin, rest = [], iter(index)
        for o in self.origin:
            if isinstance(o, slice):
                i = next(rest)
                o = (o.start + i) if not isinstance(i, slice) else \
                    slice(o.start + (i.start or 0), None)
            origin.append(o)
        return SharedRaces(self.clocks, self.name, arrays=(
            self.w_role[index], self.w_epoch[index], self.w_loc[index], self.r_epoch[every],
            self.r_loc[every]), origin=tuple(origin))

    def _in_tile(self, element):
        """A view's element as the tile's."""
        rest = iter(element)
        return tuple(o if not isinstance(o, slice) else o.start + int(next(rest))
                     for o in self.origin)

    def read(self, idx=None, active=None) -> None:
        if STATE.quiet_races or not STATE.role_depth:
            return
        me, clock, sel = self._after_writes("reads", _selection(idx, active,
                                                                self.w_role.shape))
        loc = self.clocks.location()
        self.r_epoch[me][sel] = clock[me]
        self.r_loc[me][sel] = loc

    def write(self, idx=None) -> None:
        if STATE.quiet_races or not STATE.role_depth:
            return
        me, clock, sel = self._after_writes("writes", _selection(idx, None,
                                                                 self.w_role.shape))
        for q in range(len(clock)):
            if q != me:
                unknown = self.r_epoch[q][sel] > clock[q]
                if np.any(unknown):
                    self._report("writes", "read", sel, unknown,
                                 np.full(np.shape(unknown), q), self.r_loc[q][sel])
        self.w_role[sel] = me
        self.w_epoch[sel] = clock[me]
        self.w_loc[sel] = self.clocks.location()

    def _after_writes(self, does, sel):
        """(role, its clock, ``sel``) once every other role's last write of the elements
        ``sel`` picks is ordered before this access; else a RaceError."""
        me, clock = STATE.role, self.clocks.of[STATE.role]
        writer = self.w_role[sel]
        unknown = (writer >= 0) & (writer != me) & (
            self.w_epoch[sel] > clock[np.maximum(writer, 0)])
        if unknown.any():
            self._report(does, "wrote", sel, unknown, writer, self.w_loc[sel])
        return me, clock, sel

    def _report(self, does, done, sel, unknown, who, locs):
        pos = tuple(np.argwhere(np.atleast_1d(unknown))[0]) if np.ndim(unknown) else ()
        element = self._in_tile(_element(sel, pos, self.w_role.shape))
        other = int(np.atleast_1d(who)[pos] if np.ndim(who) else who)
        loc = int(np.atleast_1d(locs)[pos] if np.ndim(locs) else locs)
        me = STATE.role
        raise RaceError(
            f"race on shared tile {self.name}{list(element)}: warpgroup role {me} {does} it "
            f"here{self.clocks.describe(self.clocks.location())}\nwhile role {other} {done} it "
            f"here{self.clocks.describe(loc)}\nand no mbarrier arrival and wait orders the two "
            f"(on the GPU the accesses may happen in either order): role {me} must wait on a "
            f"phase role {other} completes after its access, or the other way round")


def _selection(idx, active, shape):
    """What numpy indexes with: everything, an element, or the active lanes' elements."""
    if idx is None:
        return ... if active is None else np.nonzero(active)
    if active is None:
        return idx
    bshape = np.broadcast_shapes(np.shape(active), *(np.shape(i) for i in idx))
    mask = np.broadcast_to(active, bshape)
    return tuple(np.broadcast_to(i, bshape)[mask] for i in idx)


def _element(sel, pos, shape):
    """The element of ``shape`` that position ``pos`` of the selection ``sel`` is."""
    if sel is Ellipsis:
        return tuple(int(p) for p in pos)
    if all(np.ndim(i) == 0 for i in sel):
        return tuple(int(i) for i in sel)
    arrays = np.broadcast_arrays(*[np.asarray(i) for i in sel])
    return tuple(int(np.atleast_1d(a)[pos] if a.ndim else a) for a in arrays)


# -- races between the iterations of one T.Parallel loop --------------------------------

class ParallelLoop:
    """The T.Parallel loop running (``runtime.parallel_vectorized`` / ``parallel_scalar``):
    its iterations are spread over the block's threads with no barrier between them, so
    two iterations that touch one element of a shared tile or a global tensor, one of
    them writing, race on the GPU (whichever threads the compiler gives them). ``lane``
    is the running iteration in the scalar form (None in the vectorized one, where
    ``grid`` numbers them)."""

    __slots__ = ("epoch", "shape", "grid", "lane")
    count = 0           # epochs, shared with ThreadStep
    who = "an iteration of a T.Parallel loop"
    other = "another iteration of the same loop"
    advice = ("the loop's iterations run on different threads with no barrier between "
              "them; split the loop in two, or write and read the tile or tensor in "
              "separate statements")

    def __init__(self, shape):
        ParallelLoop.count += 1
        self.epoch = ParallelLoop.count
        self.shape = tuple(int(e) for e in shape)
        self.grid = None
        self.lane = None

    def lanes(self, shape):
        """The iteration of each position of an access of ``shape`` (vectorized form), or
        None where the access does not line up with the loop's iterations."""
        if self.lane is not None:
            return np.full(shape, self.lane, np.int64)
        if self.grid is None:
            self.grid = np.arange(int(np.prod(self.shape)), dtype=np.int64).reshape(self.shape)
        try:
            return np.broadcast_to(self.grid, np.broadcast_shapes(shape, self.shape))
        except ValueError:
            return None


class ThreadStep:
    """One statement of per-thread code (a kernel that reads its thread index, run
    lane-wise: ``threads.py``) that indexes a shared tile by a thread-dependent index:
    every thread does it at once, so an element one thread writes and another reads or
    writes in the same statement is a race on the GPU (no barrier can separate the two
    halves of one statement), whatever order the simulator's lanes take. Accesses at an
    index that is the same in every thread are not checked (all threads storing one
    value to one place is how such kernels set a flag)."""

    __slots__ = ("epoch", "threads")
    who = "a thread"
    other = "another thread in the same statement"
    advice = ("the block's threads run the statement at the same time and no barrier can "
              "come between its read and its write; read into a T.alloc_var or a "
              "fragment first, then write in a second statement (tilejit puts a block "
              "barrier between the two)")

    def __init__(self, threads: int):
        ParallelLoop.count += 1
        self.epoch = ParallelLoop.count
        self.threads = threads

    def lanes(self, shape):
        if not shape or shape[-1] != self.threads:
            return None
        return np.broadcast_to(np.arange(self.threads, dtype=np.int64), shape)


class ThreadRegion(ThreadStep):
    """A branch on the thread index holding per-thread code (``threads.region``): its
    statements are one step, since no barrier can go inside it."""

    __slots__ = ()
    other = ("another thread in the same branch on the thread index (no barrier can go "
             "inside it: the threads that skip it would never reach one)")
    advice = ("the block's threads run the branch's statements without a barrier between "
              "them; write in the branch and read after it (tilejit puts a block barrier "
              "after the branch), or order the branch's threads with a named barrier, "
              "T.sync_threads(id, count), or T.sync_warp() within a warp")


class IterationRaces:
    """One shared tile's or global tensor's accesses in the running T.Parallel loop: per
    element, the iteration that wrote it (-1: none) and the one that read it (-1: none,
    -2: several), valid where its stamp is the running loop's epoch (so nothing is reset
    from loop to loop: each access costs its own size). Allocated at the first access in
    a loop; a tensor of more than ``LIMIT`` elements is not tracked (its record would
    outweigh the simulation). A write of the bytes an element already holds is no race
    (eight producer threads flagging one row valid, every iteration storing one value):
    on the GPU either order leaves the same bytes.

    A read before any write to the tile in the running loop cannot find a race then (only
    a later write can, against it): it is kept as given and recorded when the loop's
    first write to the tile comes, or dropped with the loop (most loops only read the
    shared tiles they read)."""

    __slots__ = ("stamp", "wrote", "read", "pending", "written_in")
    LIMIT = 1 << 23

    def __init__(self):
        self.stamp = None
        self.pending = None         # (loop epoch, [(idx, active, loop)]) of unrecorded reads
        self.written_in = 0         # the epoch of the last loop that wrote the tile

    def access(self, tile, idx, active, write: bool, values=None):
        """``values``: what a write stores, when known."""
        loop = STATE.parallel
        if loop is None or STATE.quiet_races:
            return
        if not write and self.written_in != loop.epoch:
            if self.pending is None or self.pending[0] != loop.epoch:
                self.pending = (loop.epoch, [])
            self.pending[1].append((idx, active, loop))
            return
        if write:
            if self.pending is not None and self.pending[0] == loop.epoch:
                reads, self.pending = self.pending[1], None
                for read_idx, read_active, read_loop in reads:   # (in their order)
                    self._record(read_loop, tile, read_idx, read_active, False, None)
            self.written_in = loop.epoch
        self._record(loop, tile, idx, active, write, values)

    def _record(self, loop, tile, idx, active, write: bool, values):
        if self.stamp is None:
            if tile.data.size > self.LIMIT:
                self.stamp = False
            else:
                self.stamp = np.zeros(tile.data.shape, np.int32)
                self.wrote = np.full(tile.data.shape, -1, np.int32)
                self.read = np.full(tile.data.shape, -1, np.int32)
        if self.stamp is False:
            return
        # (a store's value counts: one element stored a value per thread is per thread)
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx),
                                    np.shape(active) if active is not None else (),
                                    np.shape(values) if values is not None else ())
        lanes = loop.lanes(shape)
        if lanes is None:
            return
        full = lanes.shape
        distinct = write and one_to_one(idx, full)
        idx = tuple(np.broadcast_to(i, full) for i in idx)
        if values is not None:
            values = np.broadcast_to(values, full)
        if active is not None:
            keep = np.broadcast_to(active, full)
            idx = tuple(i[keep] for i in idx)
            lanes = lanes[keep]
            values = None if values is None else values[keep]
        else:
            idx = tuple(i.reshape(-1) for i in idx)
            lanes = lanes.reshape(-1)
            values = None if values is None else values.reshape(-1)
        if lanes.size == 0:
            return
        # the records read and written through flat indices (one take each, not a gather
        # of every dimension); the indices are inside the tile (checked before)
        flat = np.ravel_multi_index(idx, tile.data.shape)
        stamp, wrote_at, read_at = (a.reshape(-1) for a in (self.stamp, self.wrote,
                                                              self.read))
        fresh = stamp[flat] != loop.epoch
        wrote = np.where(fresh, -1, wrote_at[flat])
        read = np.where(fresh, -1, read_at[flat])
        other_write = (wrote >= 0) & (wrote != lanes)
        stamp[flat] = loop.epoch
        if write:
            other_read = (read == -2) | ((read >= 0) & (read != lanes))
            if values is not None and (other_write.any() or other_read.any()):
                held = same_bits(tile.data[idx], values)      # the bytes already there
                other_write &= ~held
                other_read &= ~held
            # one element written by two iterations of this access (looked for only
            # where some element is written twice: a loop's own indices never are)
            same = order = None
            if not distinct and repeats(flat):
                order = np.lexsort((lanes, flat))
                ranked = flat[order]
                same = (ranked[1:] == ranked[:-1]) & (lanes[order][1:] != lanes[order][:-1])
                if values is not None:
                    v = values[order]
                    same &= ~same_bits(v[1:], v[:-1])
                if not same.any():
                    same = None
            if other_write.any() or other_read.any() or same is not None:
                what = ("written by another iteration" if other_write.any() or same is not None
                        else "read by another iteration")
                pos = int(np.argmax(other_write | other_read)) if (
                    other_write.any() or other_read.any()) else int(order[1:][same][0])
                self._report(loop, tile, idx, pos, "writes", what)
            read_at[flat] = read
            wrote_at[flat] = lanes
        else:
            if other_write.any():
                self._report(loop, tile, idx, int(np.argmax(other_write)), "reads",
                             "written by another iteration")
            wrote_at[flat] = wrote
            read_at[flat] = np.where((read == -1) | (read == lanes), lanes, -2)

    @staticmethod
    def _report(loop, tile, idx, pos, does, what):
        element = [int(i[pos]) for i in idx]
        what = what.replace("another iteration", loop.other)
        noun = "tensor" if tile.kind is None else "shared tile"
        raise RaceError(
            f"race on {noun} {tile.name}{element}: {loop.who} {does} it and it is "
            f"{what}{_caller_location(1)}\n({loop.advice})")



def repeats(flat) -> bool:
    """Whether a value occurs twice in ``flat`` (1-d flat indices): sorted, neighbours
    compared (the elements touched, not the tensor's size)."""
    ranked = np.sort(flat)
    return bool((ranked[1:] == ranked[:-1]).any())


def one_to_one(idx, shape) -> bool:
    """Whether an access at the index arrays ``idx``, broadcast over the positions
    ``shape``, reaches a different element from every position, seen from the arrays'
    shapes alone (no sort of the whole access): each axis of ``shape`` longer than 1 is
    the only long axis of exactly one index, whose values along it differ (a T.Parallel's
    open-mesh index, an expression of it, a gather by it). False means "not known", and
    the caller looks at the elements."""
    covered = set()
    for i in idx:
        dims = np.shape(i)
        long = [a for a, n in enumerate(dims) if n > 1]
        if not long:
            continue
        if len(long) > 1:
            return False
        axis = long[0] + len(shape) - len(dims)      # numpy aligns shapes at the right
        if axis in covered or np.asarray(i).strides[long[0]] == 0:
            return False
        covered.add(axis)
        values = np.sort(np.asarray(i).reshape(-1))
        if (values[1:] == values[:-1]).any():
            return False
    return all(n <= 1 or a in covered for a, n in enumerate(shape))


def same_bits(a, b):
    """Element-wise: whether ``a`` and ``b`` hold the same bytes (NaN equals NaN); of
    two 0-d values a 0-d answer (np.ascontiguousarray makes a 0-d array 1-d)."""
    a = np.asarray(a)
    b = np.asarray(b, dtype=a.dtype)
    if a.dtype.kind == "f":
        bits = np.dtype(f"u{a.dtype.itemsize}")
        same = np.ascontiguousarray(a).view(bits) == np.ascontiguousarray(b).view(bits)
        return same.reshape(()) if a.ndim == 0 and b.ndim == 0 else same
    return a == b

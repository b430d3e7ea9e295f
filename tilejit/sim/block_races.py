"""Races between the blocks of one launch on a global tensor, found in simulation.

The simulator runs a launch's blocks one after another, in block order; the GPU runs
them in any order, or at once. A kernel whose result depends on that order computes one
answer here and any of several there, so the simulator reports it instead (it is never
kinder than the GPU):

- two blocks writing one element different values (bit for bit): the element ends as
  either block's;
- a block reading an element another block wrote in the same launch, whose value the
  write changed: on the GPU the read may come first.

Writes of the same value (every block storing one flag) and reads of an element a write
left as it was are not races in effect and pass. Atomics (``T.atomic_*``) are ordered by
the hardware: they do not take an element, and their reads (an atomic reads its
destination) are checked as reads. A block that makes an acquiring access (an atomic
that returns a value, ``T.atomic_load``) orders its later accesses itself (the flag and
counter protocols of stream-K, the last block of a split reduction, the semaphore of a
serial split-K whose splits add into C in turn): its reads and writes are not checked
from then on. A block past its cluster's barrier (``T.cluster_wait``/``T.cluster_sync``:
release and acquire across the cluster) is ordered after its cluster's blocks: its
accesses are not checked against theirs. A kernel with ``T.sync_grid()`` orders its
blocks with the barrier and is not checked (``grid.py``), nor are tensors laid out by
``T.annotate_layout``, read-only ones or those of more than ``BLOCK_RACES_MAX`` elements;
nor are accesses through a ``T.view``/``T.reshape`` of a global tensor (``views.py``
makes it a tensor of its own).

Each global tensor of a launch of more than one block gets a record (``BlockRaces``):
the block that last wrote each element, the value it wrote and its line, and the
tensor's values when the launch began. ``SimTensor.wrote``/``check_written`` consult it.
"""
from __future__ import annotations

import numpy as np

from tilejit.sim.races import same_bits
from tilejit.sim.runtime import STATE, format_location, kernel_frame


# the largest tensor checked, in elements (its record holds two copies of it and two
# int32s an element); a read-only one (an input the kernel cannot write, a broadcast
# view) has no writes to order
BLOCK_RACES_MAX = 1 << 24


class BlockRaceError(RuntimeError):
    """Two blocks of one launch access one element of a global tensor, one of them
    writing, in an order the GPU does not guarantee."""


def block_id() -> int:
    bx, by, bz = STATE.block
    gx, gy, _ = STATE.grid
    return bx + gx * (by + gy * bz)


def _coords(flat: int) -> tuple:
    gx, gy, _ = STATE.grid
    return (flat % gx, flat // gx % gy, flat // (gx * gy))


def _unordered(owners, me: int):
    """Which of ``owners`` (the blocks that last wrote elements, -1 where none did) wrote
    them unordered with block ``me``'s access: another block, not one of its cluster once
    ``me`` has waited at the cluster's barrier."""
    other = (owners >= 0) & (owners != me)
    if me in STATE.cluster_waited:
        gx, gy, _ = STATE.grid
        cx, cy, cz = STATE.cluster
        bx, by, bz = STATE.block
        owners = np.asarray(owners)
        peer = (owners % gx // cx == bx // cx) & (owners // gx % gy // cy == by // cy) & \
            (owners // (gx * gy) // cz == bz // cz)
        other = other & ~peer
    return other


def _location():
    frame = kernel_frame(2)
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def _at(what: str, loc) -> str:
    return "" if loc is None else f"\n{what}:{format_location(*loc)}"


class BlockRaces:
    """The launch's record of one global tensor's elements."""

    __slots__ = ("owner", "written", "before", "lines", "line_ids", "writers", "fresh")

    def __init__(self, data: np.ndarray, fresh: bool = False):
        # per element the block that last wrote it, the value and the line: made by the
        # launch's first write (a tensor the launch only reads, its inputs, has none)
        self.owner = self.written = self.line_ids = None
        self.before = data.copy()
        self.lines = [None]
        # the blocks that wrote it: a block is checked only once another one has
        self.writers = set()
        # whether the tensor's ``unwritten`` records unwritten elements (T.empty's memory);
        # else it is all False, there only to route the accesses here, and not consulted
        self.fresh = fresh

    def _line_id(self) -> int:
        loc = _location()
        try:
            return self.lines.index(loc)
        except ValueError:
            self.lines.append(loc)
            return len(self.lines) - 1

    def _others_wrote(self, me: int) -> bool:
        """Whether a block other than ``me`` wrote the tensor in this launch."""
        return len(self.writers) > 1 or (bool(self.writers) and me not in self.writers)

    def write(self, tensor, idx) -> None:
        key = ... if idx is None else idx
        me = block_id()
        new = tensor.data[key]
        if self.owner is None:
            self.owner = np.full(tensor.data.shape, -1, dtype=np.int32)
            self.written = np.empty_like(tensor.data)
            self.line_ids = np.zeros(tensor.data.shape, dtype=np.int32)
        elif me not in STATE.block_acquired and self._others_wrote(me):
            owners = self.owner[key]
            other = _unordered(owners, me)
            if np.any(other):
                differ = other & ~same_bits(self.written[key], new)
                if np.any(differ):
                    self._report_write(tensor, key, differ, owners, new)
        self.writers.add(me)
        self.owner[key] = me
        self.written[key] = new
        self.line_ids[key] = self._line_id()

    def read(self, tensor, idx, active) -> None:
        me = block_id()
        if me in STATE.block_acquired or not self._others_wrote(me):
            return
        key = ... if idx is None else idx
        owners = self.owner[key]
        other = _unordered(owners, me)
        if active is not None:
            other = other & active
        if not np.any(other):
            return
        differ = other & ~same_bits(self.before[key], tensor.data[key])
        if np.any(differ):
            self._report_read(tensor, key, differ, owners)

    # -- the reports -------------------------------------------------------------------
    def _first(self, key, bad):
        """The first offending element's index in the tensor, and its place in ``bad``."""
        if key is ...:
            pos = tuple(int(i) for i in np.argwhere(bad)[0])
            return pos, pos
        if not np.ndim(bad):
            return tuple(int(i) for i in key), ()
        if any(isinstance(k, slice) for k in key):      # a basic key (semantics._basic_copy)
            grids, arrays, r = np.indices(np.shape(bad)), [], 0
            for k in key:
                if isinstance(k, slice):
                    arrays.append(k.start + grids[r])
                    r += 1
                else:
                    arrays.append(np.full(np.shape(bad), k))
            key = tuple(arrays)
        pos = tuple(np.argwhere(np.asarray(bad))[0])
        return tuple(int(np.broadcast_to(i, np.shape(bad))[pos]) for i in key), pos

    def _report_write(self, tensor, key, differ, owners, new):
        element, pos = self._first(key, differ)
        other = int(np.asarray(owners)[pos])
        old, value = self.written[element].item(), np.asarray(new)[pos].item()
        raise BlockRaceError(
            f"race on tensor {tensor.name!r}, element {element}: blocks {_coords(other)} and "
            f"{STATE.block} of one launch write it different values ({old!r} and "
            f"{value!r}): the GPU runs blocks in any order, so it ends as either. Write "
            f"each element from one block, or combine the values with T.atomic_add/max/min"
            f"{_at(f'block {_coords(other)} writes it', self.lines[self.line_ids[element]])}"
            f"{_at(f'block {STATE.block} writes it', _location())}")

    def _report_read(self, tensor, key, differ, owners):
        element, pos = self._first(key, differ)
        other = int(np.asarray(owners)[pos])
        raise BlockRaceError(
            f"race on tensor {tensor.name!r}, element {element}: block {STATE.block} reads "
            f"it after block {_coords(other)} of the same launch wrote it: the GPU runs "
            f"blocks in any order, so the read may see the value from before the write. "
            f"Read it in a later launch, or order the blocks (T.sync_grid(), or a flag the "
            f"writer sets and the reader takes with an atomic that returns it)"
            f"{_at(f'block {_coords(other)} writes it', self.lines[self.line_ids[element]])}"
            f"{_at(f'block {STATE.block} reads it', _location())}")

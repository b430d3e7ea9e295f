"""Shared-memory offsets of a fragment's runs of slots: a few bases and constant moves.

A copy between a fragment and a shared tile (an accumulator's epilogue staged in shared
memory, an operand read into registers) visits the thread's runs of slots one after
another (``copy._fragment_runs``). Computed per run, each offset is the shared layout's
whole expression at the run's coordinates, some twenty instructions for a swizzled
tile: FlashAttention's ``T.copy(acc_o, O_shared)`` was 1,988 lowered instructions for 64
stores, and about 100 of the kernel's 640 ms of compile time.

Within one thread the offsets of the runs mostly differ by constants. A run further
down the rows is the same offset plus a multiple of the row stride (the swizzles here
permute a row's chunks by the row's low bits, which a whole swizzle period leaves
alone); a run further along the row moves the chunk bits, an XOR inside a swizzle atom
or an add across atoms. So each run's offset is written ``(anchor ^ x) + y``: the anchor
is an earlier run's offset emitted in full, ``x`` and ``y`` are constants that are the
same at every thread. Each distinct ``(anchor, x)`` is one instruction; ``y`` becomes
the access's immediate offset. LdMatrix addresses do the same for gemm operands
(``ldmatrix.py``), chunk addresses for ``cp.async`` (``chunk_addresses.py``).

The decomposition is found by evaluating the offset of every (run, thread) at compile
time (numpy arrays through the index expressions) and holds at every thread by
construction; a run that fits no anchor becomes one.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir

from tilejit.ir.addressing import Const, evaluate, layout_offset

I32 = ir.IntType(32)

ANCHOR = None     # a run's plan entry: emitted in full


@lru_cache(maxsize=None)
def run_plan(ix, threads: int, layout, dims: tuple, firsts: tuple) -> tuple:
    """Per run: ``ANCHOR``, or (index of an earlier anchor run, x, y) with the run's
    offset ``(anchor's ^ x) + y`` at every thread.

    ``ix``: the fragment's indexing; ``dims``: per dimension of the shared tile, (index
    into ``ix.coords`` or None, start as an int): its coordinate is start + that
    fragment coordinate; ``firsts``: each run's first slot."""
    coords = [Const(start) if k is None else ix.coords[k] + start for k, start in dims]
    env = {"t": np.arange(threads, dtype=np.int64)[None, :],
           "s": np.asarray(firsts, dtype=np.int64)[:, None]}
    offsets = np.broadcast_to(np.asarray(evaluate(layout_offset(layout, coords), env),
                                         dtype=np.int64), (len(firsts), threads))
    plan, anchors = [], []        # anchors: (run index, the xor constants seen with it)
    for r in range(len(firsts)):
        got = offsets[r]
        entry = ANCHOR
        for a, xors in anchors:
            base = offsets[a]
            for x in xors:
                moved = base ^ x
                y = int(got[0] - moved[0])
                if np.array_equal(got, moved + y):
                    entry = (a, x, y)
                    break
            else:
                x = int(got[0] ^ base[0])
                if np.array_equal(got, base ^ x):
                    xors.append(x)
                    entry = (a, x, 0)
            if entry is not ANCHOR:
                break
        if entry is ANCHOR:
            anchors.append((r, [0]))
        plan.append(entry)
    return tuple(plan)


class RunOffsets:
    """The element offsets (i32) of one copy's runs in the shared tile, asked for in run
    order. Each value is emitted where it is first asked for: the caller asks outside
    any guard, so that later runs can reuse it."""

    def __init__(self, builder, plan: tuple, index: dict):
        self.builder, self.plan, self.index = builder, plan, index
        self.anchors: dict[int, ir.Value] = {}
        self.moved: dict[tuple, ir.Value] = {}

    def covers(self, run: int) -> bool:
        return run in self.index

    def pointer(self, tile_ptr, run: int, full):
        """The address of a covered run's first element; ``full()`` emits its offset
        in full (called for an anchor only). ``index``: run → its place in the plan."""
        r = self.index[run]
        b, entry = self.builder, self.plan[r]
        if entry is ANCHOR:
            self.anchors[r] = full()
            return b.gep(tile_ptr, [self.anchors[r]], inbounds=True)
        a, x, y = entry
        base = self.anchors[a]
        if x:
            if (a, x) not in self.moved:
                self.moved[(a, x)] = b.xor(base, I32(x))
            base = self.moved[(a, x)]
        ptr = b.gep(tile_ptr, [base], inbounds=True)
        return b.gep(ptr, [I32(y)], inbounds=True) if y else ptr

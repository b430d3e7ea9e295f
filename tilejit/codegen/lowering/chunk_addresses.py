"""Addresses of a thread's chunks in a global → shared ``cp.async`` copy: one base each side.

A distributed copy deals chunks of ``vec`` elements round-robin: thread ``t`` moves
chunks ``t``, ``t + T``, ``t + 2T``, … of the tile. When ``T · vec`` is a whole number of
tile rows, the chunks of one thread are the same column a fixed number of rows apart:
their copy coordinates differ by a delta that does not depend on the thread. Then

- in shared memory each chunk's offset is the first chunk's plus a constant (the
  swizzles here permute a row's chunks by the row's low bits, which a whole number of
  swizzle periods leaves alone), so every ``cp.async`` of the copy takes one base
  register and an immediate offset;
- in global memory each chunk's pointer is the previous chunk's plus one step, the
  delta times the tensor's strides, computed once.

Computed per chunk instead, every address is a loop invariant the compiler hoists out of
a pipelined loop and keeps live: 16 chunks of a 64×128 K and V tile cost 48 registers,
which spill a FlashAttention kernel of 4 warps. The decomposition is found from the
layout and checked at compile time for every thread and chunk; a copy where it does not
hold keeps the per-chunk computation.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from llvmlite import ir

from tilejit.layouts import offset_table

I32, I64 = ir.IntType(32), ir.IntType(64)


@lru_cache(maxsize=None)
def round_plan(layout, extents: tuple, vec: int, threads: int, dst_dims: tuple):
    """Per round after the first: (copy-coordinate delta, shared offset delta), or None.

    ``dst_dims``: for each dimension of the shared tile, ``(copy index or None, start)``
    (start a compile-time int): how a copy coordinate becomes a tile coordinate. Every
    (thread, round) is evaluated at once on numpy arrays, the layout through its offset
    table (a Python loop over them cost 12 ms of FlashAttention's compile)."""
    chunks = max(1, math.prod(extents) // vec)
    n_rounds = -(-chunks // threads)
    if n_rounds < 2:
        return None
    table = offset_table(layout, tuple(start + (extents[i] if i is not None else 1)
                                       for i, start in dst_dims))

    def at(items):
        """(copy coordinates per dimension, shared offsets) of chunks ``items``."""
        cc = np.unravel_index(items * vec, extents)
        tile = tuple(start + (cc[i] if i is not None else 0) for i, start in dst_dims)
        return np.stack(cc), table[tuple(np.broadcast_to(c, items.shape) for c in tile)]

    first_cc, first_off = at(np.arange(threads, dtype=np.int64))
    out = []
    for r in range(1, n_rounds):
        items = np.arange(r * threads, min((r + 1) * threads, chunks), dtype=np.int64)
        n = items.size
        cc, off = at(items)
        delta = cc - first_cc[:, :n]
        offset = off - first_off[:n]
        if (delta != delta[:, :1]).any() or (offset != offset[0]).any():
            return None
        out.append((tuple(int(d) for d in delta[:, 0]), int(offset[0])))
    return tuple(out)


class ChunkAddresses:
    """This thread's shared and global pointers for each round of a copy with a plan.

    ``shared0``, ``global0``: round 0's pointers; ``coords0``: round 0's coordinates in
    the global tensor (i64); ``byte_step(delta)``: the i64 byte step in the global
    tensor of a copy-coordinate delta. Rounds are asked for in order."""

    def __init__(self, builder, plan, shared0, global0, coords0, byte_step, opaque_steps=True,
                 inbounds=True):
        self.builder, self.shared0, self.coords0 = builder, shared0, coords0
        self.opaque_steps, self.inbounds, self.byte_step = opaque_steps, inbounds, byte_step
        zero = tuple(0 for _ in plan[0][0])
        self.deltas = [zero] + [d for d, _ in plan]
        self.offsets = [0] + [o for _, o in plan]
        self.globals = [global0]
        if not opaque_steps:
            return
        # the byte step from each round to the next, emitted here, ahead of any guard
        steps, self.steps = {}, [None]
        for prev, d in zip(self.deltas, self.deltas[1:]):
            step = tuple(a - p for a, p in zip(d, prev))
            if step not in steps:
                steps[step] = byte_step(step)
            self.steps.append(steps[step])

    def pointers(self, r):
        """(shared, global) pointers of round ``r``. With ``opaque_steps`` (cp.async in a
        pipelined loop) each global pointer is the previous one's plus a step, through
        an inline-asm add: a chain that depends on the loop's tile start, which LLVM can
        neither hoist nor fold back into one invariant per chunk. Without, round 0's
        pointer plus the round's byte offset, a plain GEP: LLVM still sees the tensor
        behind every pointer (a read-only one's loads take the non-coherent path,
        ``ld.global.nc``, which a chain longer than LLVM's underlying-object search
        loses)."""
        b = self.builder
        if r == len(self.globals):
            if self.opaque_steps:
                self.globals.append(_advance(b, self.globals[-1], self.steps[r]))
            else:
                first = self.globals[0]
                i8 = ir.PointerType(ir.IntType(8), first.type.addrspace)
                moved = b.gep(b.bitcast(first, i8), [self.byte_step(self.deltas[r])],
                              inbounds=self.inbounds)
                self.globals.append(b.bitcast(moved, first.type))
        offset = self.offsets[r]
        shared = b.gep(self.shared0, [I32(offset)], inbounds=True) if offset else self.shared0
        return shared, self.globals[r]


def _advance(builder, ptr, byte_step):
    """``ptr + byte_step`` as a global-space pointer, the add written in inline asm."""
    if ptr.type.addrspace != 1:
        ptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 1))
    add = ir.InlineAsm(ir.FunctionType(I64, [I64, I64]), "add.s64 $0, $1, $2;", "=l,l,l")
    return builder.inttoptr(builder.call(add, [builder.ptrtoint(ptr, I64), byte_step]),
                            ptr.type)

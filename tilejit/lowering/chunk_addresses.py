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

from functools import lru_cache

from llvmlite import ir

I32, I64 = ir.IntType(32), ir.IntType(64)


def _unflatten(flat: int, extents: tuple) -> tuple:
    coords = []
    for n in reversed(extents[1:]):
        coords.append(flat % n)
        flat //= n
    coords.append(flat)
    return tuple(reversed(coords))


@lru_cache(maxsize=None)
def round_plan(layout, extents: tuple, vec: int, threads: int, dst_dims: tuple):
    """Per round after the first: (copy-coordinate delta, shared offset delta), or None.

    ``dst_dims``: for each dimension of the shared tile, ``(copy index or None, start)``
    (start a compile-time int): how a copy coordinate becomes a tile coordinate."""
    chunks = max(1, _prod(extents) // vec)
    n_rounds = -(-chunks // threads)
    if n_rounds < 2:
        return None

    def tile_coords(cc):
        return tuple(start + (cc[i] if i is not None else 0) for i, start in dst_dims)

    out = []
    for r in range(1, n_rounds):
        delta = offset = None
        for t in range(threads):
            if t + r * threads >= chunks:
                break
            c0 = _unflatten(t * vec, extents)
            c1 = _unflatten((t + r * threads) * vec, extents)
            d = tuple(b - a for a, b in zip(c0, c1))
            o = layout(*tile_coords(c1)) - layout(*tile_coords(c0))
            if delta is None:
                delta, offset = d, o
            elif d != delta or o != offset:
                return None
        out.append((delta, offset))
    return tuple(out)


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


class ChunkAddresses:
    """This thread's shared and global pointers for each round of a copy with a plan.

    ``first``: (shared pointer, global pointer) of round 0; ``global_step(delta)``: the
    i64 element step in the global tensor of a copy-coordinate delta."""

    def __init__(self, builder, plan, first, global_step):
        self.builder, self.plan = builder, plan
        self.shared0, global0 = first
        # the steps between consecutive rounds, emitted here, ahead of any round's guard
        self._steps = {}
        prev = tuple(0 for _ in plan[0][0])
        for delta, _ in plan:
            step = tuple(a - p for a, p in zip(delta, prev))
            if step not in self._steps:
                self._steps[step] = global_step(step)
            prev = delta
        self._chain = [(tuple(0 for _ in plan[0][0]), global0)]   # (delta, pointer) per round
        self._chain_deltas = [self._chain[0][0]] + [d for d, _ in plan]

    def delta(self, r):
        """Round r's copy-coordinate delta from round 0."""
        return self._chain_deltas[r]

    def pointers(self, r):
        """(shared, global) pointers of round ``r``; rounds are asked for in order."""
        if r == 0:
            return self.shared0, self._chain[0][1]
        b = self.builder
        delta, offset = self.plan[r - 1]
        sptr = b.gep(self.shared0, [I32(offset)], inbounds=True) if offset else self.shared0
        # each round's global pointer is the previous one's plus the step between them:
        # a chain that depends on the loop's tile start, so nothing is hoisted and kept
        assert len(self._chain) == r, "rounds are asked for in order"
        prev_delta, prev = self._chain[-1]
        step = tuple(a - p for a, p in zip(delta, prev_delta))
        gptr = _opaque_advance(b, prev, self._steps[step])
        self._chain.append((delta, gptr))
        return sptr, gptr


def opaque(builder, value):
    """``value`` through an inline-asm move: LLVM cannot see through it, so expressions
    of it stay where they are written instead of being reassociated into one hoisted
    loop invariant per chunk (which costs a register each across the loop)."""
    bits = value.type.width
    kind = {32: "b32", 64: "b64"}[bits]
    mov = ir.InlineAsm(ir.FunctionType(value.type, [value.type]), f"mov.{kind} $0, $1;",
                       "=r,r" if bits == 32 else "=l,l")
    return builder.call(mov, [value])


def _opaque_advance(builder, ptr, step):
    """``ptr + step`` elements, as a global-space pointer, through an inline-asm add
    (see ``opaque``): written as a GEP, the chain is folded back into one hoisted
    invariant per chunk."""
    elem = ptr.type.pointee
    if ptr.type.addrspace != 1:
        ptr = builder.addrspacecast(ptr, ir.PointerType(elem, 1))
    size = builder.ptrtoint(builder.gep(ir.Constant(ir.PointerType(elem), None), [I32(1)]), I64)
    add = ir.InlineAsm(ir.FunctionType(I64, [I64, I64]), "add.s64 $0, $1, $2;", "=l,l,l")
    moved = builder.call(add, [builder.ptrtoint(ptr, I64), builder.mul(step, size)])
    return builder.inttoptr(moved, ptr.type)

"""Lane addresses of ``T.gemm``'s ``ldmatrix`` loads: one base register per operand.

Each lane of a warp supplies the address of one 16-byte row of an 8x8 matrix. For the
A operand of row tile ``rm`` at k step ``kk`` (and likewise B's column-tile pair and k
step) the address is the tile layout's offset of a (row, col) that moves with both
indices. One index moves rows: in every layout here that adds a constant to every
lane's offset. The other moves 16 columns inside a row: in a swizzled layout that is an
XOR of the chunk bits (the swizzle permutes the chunks of a row by the row's low bits,
which a whole number of 16-row steps leaves alone), in a plain one an add.

So the offsets are ``move(base, c) + y[r]``: the base is computed once per thread, the
column moves are one instruction each (kept next to their loads rather than hoisted
out of the loop, where each would hold a register), and the row moves are constants
that become the instruction's immediate offset. CUTLASS's shared-memory
iterators do the same by construction; here the decomposition is found from the
layout and checked at compile time for every lane of every warp and every (row, column)
step. A layout where it does not hold keeps the general per-address computation.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir

from tilejit.ir.addressing import Var, evaluate, layout_offset
from tilejit.codegen.lowering.tiles import emit, opaque

I32 = ir.IntType(32)
LANE, ROW0, COL0 = Var("lane"), Var("row0"), Var("col0")


def a_coords(gp, rm, kk):
    """(row, col) in the A tile of this lane's 16-byte row for ldmatrix.x4 (rm, kk) (a
    region operand's origin added)."""
    mi, r = LANE // 8, LANE % 8
    lo, hi = (mi % 2) * 8, (mi // 2) * 8
    if gp.transpose_A:                   # tile (K, M): rows are k, .trans
        return _at(gp.a_origin, kk * 16 + hi + r, ROW0 + rm * 16 + lo)
    return _at(gp.a_origin, ROW0 + rm * 16 + lo + r, kk * 16 + hi)


def _at(origin, row, col):
    """(row, col) of a gemm operand moved to its region's origin in the tile."""
    r0, c0 = origin
    return (row + r0 if r0 else row), (col + c0 if c0 else col)


def b_coords(gp, pair, kk, count=4):
    """(row, col) in the B tile for the ldmatrix of column tiles 2·pair, 2·pair + 1."""
    r, mi = LANE % 8, LANE // 8
    m = mi if count == 4 else mi % 2
    k_half, n_half = (m % 2) * 8, (m // 2) * 8
    n0 = COL0 + pair * 16 + n_half
    k0 = kk * 16 + k_half
    return _at(gp.b_origin, *((n0 + r, k0) if gp.transpose_B else (k0 + r, n0)))


@lru_cache(maxsize=None)
def _plan(layout, gp, operand, n_i, n_kk, col_moves):
    """({col index: ("xor" | "add", constant)}, {row index: constant}) or None.

    Every offset is evaluated for all lanes of all warps at once (numpy arrays through
    the index expressions)."""
    coords = a_coords if operand == "A" else b_coords
    warps = np.repeat(np.arange(gp.threads // 32), 32)
    n = warps.size
    env = {"lane": np.tile(np.arange(32), gp.threads // 32),
           "row0": (warps % gp.warps_m) * gp.warp_m, "col0": (warps // gp.warps_m) * gp.warp_n}
    values = {(i, kk): np.broadcast_to(evaluate(layout_offset(layout, list(coords(gp, i, kk))),
                                                env), (n,))
              for i in range(n_i) for kk in range(n_kk)}
    base = values[(0, 0)]

    def at(c, r):
        return values[(c, r) if col_moves == "i" else (r, c)]

    n_col, n_row = (n_i, n_kk) if col_moves == "i" else (n_kk, n_i)
    moves, moved = {}, {}
    for c in range(n_col):
        got = at(c, 0)
        x, y = int(got[0] ^ base[0]), int(got[0] - base[0])
        if np.array_equal(got, base ^ x):
            moves[c], moved[c] = ("xor", x), base ^ x
        elif np.array_equal(got, base + y):
            moves[c], moved[c] = ("add", y), base + y
        else:
            return None
    rows = {r: int(at(0, r)[0] - base[0]) for r in range(n_row)}
    for c in range(n_col):
        for r in range(n_row):
            if not np.array_equal(at(c, r), moved[c] + rows[r]):
                return None
    return moves, rows


class LaneAddresses:
    """The offsets (elements, i32) of one operand's ldmatrix loads in one T.gemm."""

    def __init__(self, builder, tile, gp, operand, n_i, n_kk, env):
        self.builder, self.tile, self.gp, self.operand, self.env = builder, tile, gp, operand, env
        transposed = gp.transpose_A if operand == "A" else not gp.transpose_B
        # which index moves along a row: k for A (M, K) and B (N, K); the other else
        self.col_moves = "i" if transposed else "kk"
        self.plan = _plan(tile.layout, gp, operand, n_i, n_kk, self.col_moves)
        self._moved = {}
        if self.plan is not None:
            # opaque: the column moves are then computed next to their loads, in the
            # loop, instead of hoisted out of it as one live register each (14 in
            # FlashAttention's 128x64 kernel, which spilled)
            self.base = opaque(builder, emit(builder, layout_offset(
                tile.layout, list(self._coords(0, 0))), env))

    def _coords(self, i, kk, count=4):
        if self.operand == "A":
            return a_coords(self.gp, i, kk)
        return b_coords(self.gp, i, kk, count)

    def pointer(self, base_ptr, i, kk, count=4):
        """The lane's address for step (i, kk) of an ldmatrix.x``count``; computed in
        full without a plan, and for B's x2 load of an odd last column tile."""
        b = self.builder
        if self.plan is None or count != 4:
            coords = list(self._coords(i, kk, count))
            off = emit(b, layout_offset(self.tile.layout, coords), self.env)
            return b.gep(base_ptr, [off], inbounds=True)
        moves, rows = self.plan
        c, r = (i, kk) if self.col_moves == "i" else (kk, i)
        v = self._moved.get(c)
        if v is None:
            op, k = moves[c]
            v = self.base if k == 0 else (b.xor(self.base, I32(k)) if op == "xor"
                                          else b.add(self.base, I32(k)))
            self._moved[c] = v
        ptr = b.gep(base_ptr, [v], inbounds=True)
        return b.gep(ptr, [I32(rows[r])], inbounds=True) if rows[r] else ptr

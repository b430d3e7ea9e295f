"""The simulator's meaning of the warp instructions ``TensorCoreIntrinEmitter`` expands to
(``frontend/mma_emitter_calls.py``): ``__tj_ldmatrix`` and ``__tj_mma_sync``, each the
PTX instruction done by every warp of the block at once, on the per-thread arrays of a
lane-wise block (``threads.py``: ``T.alloc_local`` arrays are ``LaneTensor``s, one row
per thread).

- ldmatrix.x<count> (PTX ISA "Warp-level matrix load instruction: ldmatrix"): lane
  ``8q + r`` gives the address of row ``r`` of 8 x 8 matrix ``q`` (16 bytes: 8 16-bit or
  16 8-bit elements); lane ``t`` receives register ``q`` = row ``t // 4``, elements ``4 /
  itemsize · (t % 4) …`` of matrix ``q``; with ``.trans`` (16-bit only) element ``t // 4``
  of rows ``2 · (t % 4)`` and ``2 · (t % 4) + 1``. The register's elements go to
  ``local[offset + q · per_register …]``, the lowest-addressed first (as the GPU's
  little-endian registers hold them).
- mma.sync m16n8k16 / m16n8k32: each warp's A (16 x K), B (K x 8) and C (16 x 8) are
  gathered from its lanes by PTX's fragments (``layouts.mma_fragment``), D = A·B + C is
  computed exactly (float64, int64) and rounded once to the accumulator's dtype (the
  tensor core's own summation order is not specified: results may differ from the GPU's
  in the last bits), and scattered back.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tilejit.layouts import mma_fragment
from tilejit.sim.runtime import STATE, _caller_location
from tilejit.sim.threads import LaneTensor, ThreadCodeError, _active

WARP = 32


def _warp_collective(name, tiles):
    lanes = STATE.lanes
    if not lanes or lanes % WARP:
        raise ThreadCodeError(f"{name} needs the block in whole warps of 32 threads, got "
                              f"{lanes}{_caller_location(3)}")
    active = _active()
    if active is not None and not np.all(active):
        raise ThreadCodeError(f"{name} inside a branch that depends on the thread index: "
                              f"every lane of the warp takes part in the instruction"
                              f"{_caller_location(3)}")
    for what, t in tiles:
        if not isinstance(t, LaneTensor):
            raise TypeError(f"{name}: {what} must be a T.alloc_local array, got "
                            f"{getattr(t, 'name', t)!r}{_caller_location(3)}")
    return lanes


def _slots(name, what, tile, offset, count):
    if offset + count > tile.shape[0] or tile.ndim != 1:
        raise IndexError(f"{name}: {what} {tile.name} (shape {tuple(tile.shape)}) needs "
                         f"elements {offset} to {offset + count - 1} in one dimension"
                         f"{_caller_location(3)}")
    return np.arange(offset, offset + count)


def ldmatrix(local, offset, shared, row, col, count, trans):
    name = f"ldmatrix.x{count}{'.trans' if trans else ''}"
    lanes = _warp_collective(name, [("the destination", local)])
    if getattr(shared, "kind", None) != "shared" or shared.data.ndim != 2:
        raise TypeError(f"{name}: the source must be a 2-d shared tile, got "
                        f"{getattr(shared, 'name', shared)!r}{_caller_location(2)}")
    if shared.dtype != local.dtype:
        raise TypeError(f"{name}: {shared.name} holds {shared.dtype.name} and {local.name} "
                        f"{local.dtype.name}{_caller_location(2)}")
    size = shared.dtype.itemsize
    per_register, per_row = 4 // size, 16 // size
    _slots(name, "the destination", local, offset, count * per_register)
    lane = np.arange(lanes)
    row = np.broadcast_to(np.asarray(row, dtype=np.int64), (lanes,))
    col = np.broadcast_to(np.asarray(col, dtype=np.int64), (lanes,))
    used = (lane % WARP) < 8 * count
    rows, cols = shared.data.shape
    bad = used & ((col % per_row != 0) | (row < 0) | (row >= rows) | (col < 0)
                  | (col + per_row > cols))
    if bad.any():
        t = int(np.argmax(bad))
        raise IndexError(f"{name}: thread {t} addresses {shared.name}[{row[t]}, "
                         f"{col[t]}:{col[t] + per_row}], not a 16-byte row of the "
                         f"{rows}x{cols} tile{_caller_location(2)}")
    # every register q and element e at once: index arrays (count, per_register, lanes)
    base, t = lane - lane % WARP, lane % WARP
    q = np.arange(count)[:, None, None]
    e = np.arange(per_register)[None, :, None]
    shape = (count, per_register, lanes)
    if trans:
        src = base + 8 * q + 2 * (t % 4) + e
        r, c = row[src], col[src] + t // 4
    else:
        src = np.broadcast_to(base + 8 * q + t // 4, shape)
        r, c = row[src], col[src] + per_register * (t % 4) + e
    r, c = np.broadcast_to(r, shape), np.broadcast_to(c, shape)
    shared.check_written((r, c))
    slot = np.broadcast_to(offset + q * per_register + e, shape)
    at = np.broadcast_to(lane, shape)
    local.data[at, slot] = shared.data[r, c]
    local.wrote((at, slot))


@lru_cache(maxsize=None)
def _fragment(dtype: str, operand: str):
    """(rows, cols) of each (lane, slot) of one mma operand: int arrays (32, slots)."""
    instr, kind = ("m16n8k32", "int8") if dtype == "int8" else ("m16n8k16", "f16")
    frag = mma_fragment(instr, kind, operand)
    inverse = frag.inverse()
    slots = frag.slots_per_thread
    rc = np.array([[inverse(t, s) for s in range(slots)] for t in range(WARP)])
    return rc[..., 0], rc[..., 1], frag.shape


@lru_cache(maxsize=None)
def _lane_column(lanes: int):
    column = np.arange(lanes)[:, None]
    column.flags.writeable = False      # (shared by every call: an index, never written)
    return column


@lru_cache(maxsize=None)
def _element_order(dtype: str, operand: str):
    """For each element of the operand's matrix, in row-major order, its place in a
    warp's (lane, slot) values flattened: the fragment maps the two one to one."""
    rows, cols, shape = _fragment(dtype, operand)
    order = np.empty(shape[0] * shape[1], np.int64)
    order[rows.reshape(-1) * shape[1] + cols.reshape(-1)] = np.arange(rows.size)
    return order, tuple(shape)


def _gather(name, what, tile, offset, dtype, operand, lanes):
    order, shape = _element_order(dtype, operand)
    count = order.size // WARP
    slots = _slots(name, what, tile, offset, count)
    tile.check_written((_lane_column(lanes), slots[None, :]))
    values = tile.data[:, offset:offset + count].reshape(lanes // WARP, WARP * count)
    wide = np.int64 if tile.dtype.is_int else np.float64
    return values[:, order].astype(wide).reshape((lanes // WARP,) + shape)


def mma_sync(c, c_offset, a, a_offset, b, b_offset):
    name = "mma.sync"
    lanes = _warp_collective(name, [("C", c), ("A", a), ("B", b)])
    dtype = a.dtype.name
    if b.dtype.name != dtype or dtype not in ("float16", "bfloat16", "int8"):
        raise TypeError(f"{name}: A and B must both be float16, bfloat16 or int8, got "
                        f"{a.name}: {dtype}, {b.name}: {b.dtype.name}{_caller_location(2)}")
    A = _gather(name, "A", a, a_offset, dtype, "A", lanes)
    B = _gather(name, "B", b, b_offset, dtype, "B", lanes)
    C = _gather(name, "C", c, c_offset, dtype, "C", lanes)
    D = A @ B + C
    rows, cols, _ = _fragment(dtype, "C")
    values = D[:, rows, cols].reshape(lanes, -1)
    if c.dtype.name == "int32":
        values = ((values + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    else:
        # one rounding to the accumulator's dtype (float32 or float16)
        values = values.astype(c.dtype.numpy).astype(c.data.dtype)
    slots = _slots(name, "C", c, c_offset, rows.shape[1])
    c.data[:, slots] = values
    c.wrote((_lane_column(lanes), slots[None, :]))

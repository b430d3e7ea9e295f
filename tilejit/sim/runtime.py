"""What simulated kernels run on.

A ``T.Parallel`` body runs once for the whole tile: its indices are numpy arrays of
the tile's shape, every value computed from them is an array, and ``if``/``else`` and
conditional expressions execute under a mask of the lanes they apply to (as a GPU's
predicated threads do). Tensor reads and writes check bounds on the active lanes only
and name the kernel's file and line when they fail.
"""
from __future__ import annotations

import linecache
import sys

import numpy as np

from tilejit.language import numerics
from tilejit.language.dtypes import DType, bfloat16


class _State:
    def __init__(self):
        self.block = (0, 0, 0)
        self.mask = None          # boolean array over the current T.Parallel tile


STATE = _State()


def block_index(axis):
    return STATE.block[axis]


def parallel_vectorized(*extents):
    """One iteration whose indices are whole-tile index arrays."""
    grids = np.indices(tuple(int(e) for e in extents), dtype=np.int32)
    yield grids[0] if len(extents) == 1 else tuple(grids)


def parallel_scalar(*extents):
    """Every iteration, in row-major order, with Python int indices."""
    if len(extents) == 1:
        yield from range(int(extents[0]))
        return
    for flat in np.ndindex(*(int(e) for e in extents)):
        yield flat


class where:
    """``with where(cond):`` narrows the active lanes to those where ``cond`` holds;
    ``negate=True`` is the ``else`` branch."""

    def __init__(self, cond, negate=False):
        self.cond = cond
        self.negate = negate

    def __enter__(self):
        self.outer = STATE.mask
        cond = np.asarray(self.cond, dtype=bool)
        if self.negate:
            cond = ~cond
        STATE.mask = cond if self.outer is None else (self.outer & cond)
        return STATE.mask

    def __exit__(self, *exc):
        STATE.mask = self.outer
        return False


def may_run(cond, negate=False) -> bool:
    """False only when a branch's condition is one scalar value that excludes it."""
    if np.ndim(cond) == 0:
        return bool(cond) != bool(negate)
    return True


def any_active() -> bool:
    return STATE.mask is None or bool(np.any(STATE.mask))


def blend(old, new):
    """A name assigned under a mask keeps its old value on inactive lanes."""
    mask = STATE.mask
    if mask is None or old is None:
        return new
    if np.ndim(mask) == 0:
        return new if bool(mask) else old
    return np.where(mask, new, old)


def ifexp(cond, then_fn, else_fn):
    """``a if c else b``: each side evaluated under its mask, then selected."""
    if np.ndim(cond) == 0 and STATE.mask is None:
        return then_fn() if cond else else_fn()
    with where(cond):
        a = then_fn() if any_active() else 0
    with where(cond, negate=True):
        b = else_fn() if any_active() else 0
    return np.where(cond, a, b)


def logical_and(a, b):
    return np.logical_and(a, b)


def logical_or(a, b):
    return np.logical_or(a, b)


def logical_not(a):
    return np.logical_not(a)


def _caller_location(depth=2) -> str:
    frame = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return ""
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    text = linecache.getline(filename, lineno).strip()
    return f'\n  File "{filename}", line {lineno}\n    {text}'


class SimTensor:
    """A global tensor in simulation: a numpy array (bfloat16 held in float32)."""

    __slots__ = ("data", "dtype", "name")

    def __init__(self, data: np.ndarray, dtype: DType, name: str):
        self.data, self.dtype, self.name = data, dtype, name

    @property
    def shape(self):
        return self.data.shape

    @property
    def strides(self):
        return tuple(s // self.data.itemsize for s in self.data.strides)

    @property
    def ndim(self):
        return self.data.ndim

    def _indices(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.data.ndim:
            raise IndexError(f"{self.name}: a {self.data.ndim}-d tensor indexed with "
                             f"{len(idx)} index(es){_caller_location(3)}")
        return idx

    def _check(self, idx, active):
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx),
                                    np.shape(active) if active is not None else ())
        bad = np.zeros(shape, dtype=bool)
        for i, n in zip(idx, self.data.shape):
            bad |= (np.asarray(i) < 0) | (np.asarray(i) >= n)
        if active is not None:
            bad &= active
        if bad.any():
            pos = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
            first = tuple(int(np.broadcast_to(i, shape)[pos]) for i in idx)
            raise IndexError(f"{self.name}[{', '.join(map(str, first))}] is out of bounds "
                             f"for shape {tuple(self.data.shape)}{_caller_location(3)}")

    def __getitem__(self, index):
        idx = self._indices(index)
        mask = STATE.mask
        if all(np.ndim(i) == 0 for i in idx) and (mask is None or np.ndim(mask) == 0):
            if mask is not None and not bool(mask):
                return self.data.dtype.type(0)
            self._check(idx, None)
            return self.data[tuple(int(i) for i in idx)]
        arrays = np.broadcast_arrays(*idx, *(() if mask is None else (mask,)))
        idx_b = arrays[:len(idx)]
        active = None if mask is None else arrays[-1]
        self._check(idx_b, active)
        if active is None:
            return self.data[tuple(idx_b)]
        safe = tuple(np.where(active, i, 0) for i in idx_b)
        return np.where(active, self.data[safe], self.data.dtype.type(0))

    def __setitem__(self, index, value):
        idx = self._indices(index)
        mask = STATE.mask
        value = _to_storage(value, self.dtype, self.data.dtype)
        if all(np.ndim(i) == 0 for i in idx) and np.ndim(value) == 0 and (
                mask is None or np.ndim(mask) == 0):
            if mask is not None and not bool(mask):
                return
            self._check(idx, None)
            self.data[tuple(int(i) for i in idx)] = value
            return
        arrays = np.broadcast_arrays(*idx, value, *(() if mask is None else (mask,)))
        idx_b, value_b = arrays[:len(idx)], arrays[len(idx)]
        active = None if mask is None else arrays[-1]
        self._check(idx_b, active)
        if active is None:
            self.data[tuple(idx_b)] = value_b
        else:
            self.data[tuple(i[active] for i in idx_b)] = value_b[active]


def _to_storage(value, dtype: DType, storage: np.dtype):
    if dtype == bfloat16:
        return numerics.round_to_bfloat16(np.asarray(value, dtype=np.float32))
    if dtype.is_int and np.asarray(value).dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(value).astype(storage)
    return np.asarray(value).astype(storage, copy=False)

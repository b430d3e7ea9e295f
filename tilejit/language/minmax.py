"""The larger and smaller of floats as the GPU computes them: PTX ``max``/``min`` (IEEE
754-2019's maximumNumber/minimumNumber: a NaN loses) and ``max.NaN``/``min.NaN`` (its
maximum/minimum: a NaN wins), both ordering −0 below +0 (the PTX ISA's semantics of
``max``: "+0.0 > -0.0 here"; of ``min`` alike). numpy's ``fmax``, ``fmin``,
``maximum`` and ``minimum`` return either zero of two (which one depends on the dtype's
loop), so each operation here fixes the sign where every operand it chose among is a
zero: the larger is +0 unless all were −0, the smaller −0 unless all were +0.

Each is called as a ufunc of two values (``FMAX(a, b)``) and has the ``reduce`` and
``accumulate`` the simulator's reductions and scans use."""
from __future__ import annotations

import numpy as np


class _Ordered:
    __slots__ = ("base", "larger", "__name__")

    def __init__(self, base, larger: bool):
        self.base, self.larger, self.__name__ = base, larger, base.__name__

    def __call__(self, a, b):
        out = self.base(a, b)
        result = np.asarray(out)
        if result.dtype.kind != "f":
            return out
        zero = result == 0              # (usually none: one comparison)
        if not zero.any():
            return out
        zeros = zero & (np.asarray(a) == 0) & (np.asarray(b) == 0)
        with np.errstate(all="ignore"):
            # zeros only: a + b is +0 unless both are −0; −(−a − b) is −0 unless both +0
            signed = a + b if self.larger else -((-a) + (-b))
        fixed = np.where(zeros, signed, result).astype(result.dtype)
        return fixed if fixed.ndim else fixed[()]

    def _fix(self, out, values, any_along):
        out = np.asarray(out)
        if not np.any(out == 0):
            return out
        sign = np.signbit(values)
        other = (values == 0) & (~sign if self.larger else sign)
        seen = any_along(other)
        zero = np.zeros((), out.dtype)
        other_zero = zero if self.larger else -zero
        chosen = np.where(seen, other_zero, -other_zero).astype(out.dtype)
        return np.where(out == 0, chosen, out)

    def reduce(self, values, axis=0):
        values = np.asarray(values)
        out = self.base.reduce(values, axis=axis)
        if values.dtype.kind != "f":
            return out
        fixed = self._fix(out, values, lambda m: np.any(m, axis=axis))
        return fixed if np.ndim(out) else fixed[()]

    def at(self, data, idx, values):
        """``ufunc.at``: each of ``values`` combined into ``data[idx]`` in place (repeated
        elements in turn); an element that ends at zero is +0 (the larger) if it or any
        value combined into it was +0, else −0 (the smaller alike)."""
        if data.dtype.kind != "f":
            self.base.at(data, idx, values)
            return
        values = np.broadcast_to(np.asarray(values, dtype=data.dtype), np.shape(data[idx]))

        def other(v):       # the zero that wins: +0 for the larger, −0 for the smaller
            return (v == 0) & (~np.signbit(v) if self.larger else np.signbit(v))
        seen = np.zeros(data.shape, bool)
        touched = np.zeros(data.shape, bool)
        touched[idx] = True
        seen[touched] = other(data[touched])
        np.logical_or.at(seen, idx, other(values))
        self.base.at(data, idx, values)
        zero = touched & (data == 0)
        if zero.any():
            wins = np.zeros((), data.dtype) if self.larger else -np.zeros((), data.dtype)
            data[zero & seen] = wins
            data[zero & ~seen] = -wins

    def accumulate(self, values, axis=0):
        values = np.asarray(values)
        out = self.base.accumulate(values, axis=axis)
        if values.dtype.kind != "f":
            return out
        return self._fix(out, values, lambda m: np.logical_or.accumulate(m, axis=axis))


FMAX = _Ordered(np.fmax, True)          # PTX max: a NaN loses
FMIN = _Ordered(np.fmin, False)         # PTX min
MAXIMUM = _Ordered(np.maximum, True)    # PTX max.NaN: a NaN wins
MINIMUM = _Ordered(np.minimum, False)   # PTX min.NaN

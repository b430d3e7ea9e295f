"""Numeric semantics shared by the simulator and the language's Python meaning."""
from __future__ import annotations

import numpy as np

from tilejit.language.dtypes import DType, bfloat16


def round_to_bfloat16(x) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept in float32.

    bfloat16 is the upper half of an IEEE binary32: add 0x7FFF plus the lowest kept
    bit, then clear the low 16 bits. NaNs stay NaN (quiet)."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    out = np.where(np.isnan(a), np.float32(np.nan), out)
    return out if isinstance(x, np.ndarray) else np.float32(out)


def cast(value, dtype: DType):
    if dtype == bfloat16:
        return round_to_bfloat16(np.asarray(value).astype(np.float32))
    target = dtype.numpy
    arr = np.asarray(value)
    if dtype.is_int and arr.dtype.kind == "f":
        arr = np.trunc(arr)
    with np.errstate(invalid="ignore", over="ignore"):
        out = arr.astype(target)
    return out if isinstance(value, np.ndarray) else out[()]


def select(cond, a, b):
    if isinstance(cond, (bool, np.bool_)) and np.ndim(a) == 0 and np.ndim(b) == 0:
        return a if cond else b
    return np.where(cond, a, b)


def _is_float(x) -> bool:
    return isinstance(x, float) or np.asarray(x).dtype.kind == "f"


def maximum(a, b):
    return np.fmax(a, b) if (_is_float(a) or _is_float(b)) else np.maximum(a, b)


def minimum(a, b):
    return np.fmin(a, b) if (_is_float(a) or _is_float(b)) else np.minimum(a, b)

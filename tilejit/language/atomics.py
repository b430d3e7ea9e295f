"""Atomics: ``T.atomic_add | atomic_max | atomic_min(dst, value, return_prev=False)``.

Two forms (the compiler tells them apart in the source, ``passes/tile_allocation.py``):

- element: ``dst`` is one element, ``C[i, j]`` of a global tensor or ``S[i]`` of a shared
  tile. The front end rewrites the call to ``__tj_atomic_add(C, (i, j), v, return_prev,
  per_lane)`` (``element_atomic`` below is its simulation). Inside a ``T.Parallel`` each
  iteration performs its atomic once; outside one, the block performs it once (thread
  0 on the GPU), and ``return_prev=True`` is then a compile error.
- region: ``dst`` is a sliced region ``C[r0:r1, c0:c1]`` (or a whole tensor or shared
  tile) and ``value`` a tile of the same extent: every element of ``value`` is combined
  into its element of ``dst`` once; elements of a global region outside the tensor are
  skipped, as ``T.copy`` does.

The value converts to ``dst``'s dtype first (weak-scalar rules: ``T.atomic_add(H[i],
1.0)`` on float16 adds a float16 1). ``atomic_max``/``atomic_min`` on floats follow
``T.max``/``T.min``: a NaN operand is ignored (IEEE maxNum; a NaN already in memory is
replaced by the value). ``return_prev=True`` returns the element's value just before
this atomic. When several lanes of one ``T.Parallel`` hit the same element the GPU
orders them arbitrarily; the simulator applies them in row-major lane order, so its
previous values are one of the orders the GPU may produce, and its final values equal
the GPU's exactly for integers, max and min (for float adds, up to rounding order).
"""
from __future__ import annotations

import numpy as np

from tilejit.language import numerics as _num
from tilejit.language.dtypes import bfloat16

OPS = ("add", "max", "min")
# the element dtypes atomics support
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint32", "uint64")


def _combine(op, old, value, dtype):
    if op == "add":
        with np.errstate(over="ignore"):
            return old + value
    if op == "max":
        return np.fmax(old, value) if dtype.is_float else np.maximum(old, value)
    return np.fmin(old, value) if dtype.is_float else np.minimum(old, value)


def _check_dtype(tensor, what):
    if tensor.dtype.name not in DTYPES:
        raise TypeError(f"{what}: atomics support {', '.join(DTYPES)}; got a "
                        f"{tensor.dtype.name} destination")


def _apply(op, tensor, idx, values):
    """Combine ``values`` into ``tensor.data[idx]`` one lane at a time (in lane order when
    several lanes share an element); the previous value of every lane."""
    from tilejit.sim.runtime import _to_storage
    data, dtype = tensor.data, tensor.dtype
    n = values.shape[0]
    old_out = np.empty(n, dtype=data.dtype)
    if n == 0:
        return old_out
    flat = np.ravel_multi_index(idx, data.shape)
    remaining = np.arange(n)
    while remaining.size:
        # the first remaining lane of each element goes this round
        _, first = np.unique(flat[remaining], return_index=True)
        lanes = remaining[np.sort(first)]
        where = tuple(i[lanes] for i in idx)
        old = data[where]
        old_out[lanes] = old
        data[where] = _to_storage(_combine(op, old, values[lanes], dtype), dtype, data.dtype)
        remaining = np.setdiff1d(remaining, lanes, assume_unique=True)
    return old_out


def element_atomic(op, tensor, index, value, return_prev=False, per_lane=True):
    """The simulation of an element atomic: ``tensor[index] op= value`` on each active
    lane, once per lane."""
    from tilejit.sim.runtime import STATE
    what = f"T.atomic_{op}"
    _check_dtype(tensor, what)
    dtype = tensor.dtype
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != tensor.data.ndim:
        raise IndexError(f"{what}: a {tensor.data.ndim}-d {tensor.name} indexed with "
                         f"{len(idx)} index(es)")
    mask = STATE.mask
    shapes = [np.shape(i) for i in idx] + [np.shape(value)]
    if mask is not None:
        shapes.append(np.shape(mask))
    shape = np.broadcast_shapes(*shapes)
    active = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)
    idx_b = [np.broadcast_to(np.asarray(i, dtype=np.int64), shape) for i in idx]
    tensor._check(idx_b, active)
    v = _num.cast(value, dtype) if dtype != bfloat16 else _num.round_to_bfloat16(
        np.asarray(value, dtype=np.float32))
    v_b = np.broadcast_to(np.asarray(v, dtype=tensor.data.dtype), shape)
    sel = active.reshape(-1)
    old = _apply(op, tensor, tuple(i.reshape(-1)[sel] for i in idx_b), v_b.reshape(-1)[sel])
    if not return_prev:
        return None
    out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=tensor.data.dtype)
    out[sel] = old
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


def region_atomic(op, dst, value, return_prev=False):
    """The simulation of the region form: every element of ``value`` combined into its
    element of ``dst`` (a region, a tensor or a shared tile) once."""
    from tilejit.language.tiles import _block_index, _resolve
    what = f"T.atomic_{op}"
    if return_prev:
        raise TypeError(f"{what}: return_prev=True needs an element destination, not a "
                        f"region")
    if np.ndim(value) == 0 and not hasattr(value, "data") and not hasattr(value, "tensor"):
        raise TypeError(f"{what}: a region destination needs a tile value; index the "
                        f"destination (C[i, j]) to combine a scalar")
    (s_t, s_start, s_ranged, s_ext), (d_t, d_start, d_ranged, d_ext) = _resolve(
        value, dst, what)
    _check_dtype(d_t, what)
    s_idx, s_in = _block_index(s_start, s_ranged, s_ext, s_t.shape)
    d_idx, d_in = _block_index(d_start, d_ranged, d_ext, d_t.shape)
    safe = tuple(np.where(s_in, i, 0) for i in s_idx)
    values = np.where(s_in, s_t.data[safe], s_t.data.dtype.type(0)).reshape(-1)
    values = _num.cast(values, d_t.dtype) if d_t.dtype != bfloat16 else \
        _num.round_to_bfloat16(values.astype(np.float32))
    keep = d_in.reshape(-1)
    _apply(op, d_t, tuple(i.reshape(-1)[keep] for i in d_idx),
           np.asarray(values, dtype=d_t.data.dtype)[keep])
    return None


def _element_form(dst):
    # an element read outside a compiled kernel is a plain number: nothing to update
    return np.ndim(dst) == 0 and not hasattr(dst, "data") and not hasattr(dst, "tensor")


def _atomic(op, dst, value, return_prev):
    if _element_form(dst):
        raise TypeError(f"T.atomic_{op}: the destination must be an element or region of a "
                        f"tensor or shared tile (C[i, j], C[r0:r1, c]), inside a kernel")
    return region_atomic(op, dst, value, return_prev)


def atomic_add(dst, value, return_prev=False):
    """``dst += value`` atomically: ``dst`` an element (``C[i, j]``, a global tensor or a
    shared tile) or a region (``C[r0:r1, c0:c1]``) with a tile ``value``. With
    ``return_prev=True`` (element form) returns the element's previous value."""
    return _atomic("add", dst, value, return_prev)


def atomic_max(dst, value, return_prev=False):
    """``dst = max(dst, value)`` atomically (a NaN operand is ignored, as ``T.max``)."""
    return _atomic("max", dst, value, return_prev)


def atomic_min(dst, value, return_prev=False):
    """``dst = min(dst, value)`` atomically (a NaN operand is ignored, as ``T.min``)."""
    return _atomic("min", dst, value, return_prev)


def _element(op):
    def fn(tensor, index, value, return_prev=False, per_lane=True):
        return element_atomic(op, tensor, index, value, return_prev, per_lane)
    fn.__name__ = fn.__qualname__ = f"element_atomic_{op}"
    return fn


# the simulator's meaning of the names the front end inserts (``__tj_atomic_add`` …)
SIM_ELEMENT = {op: _element(op) for op in OPS}
FUNCTIONS = {"add": atomic_add, "max": atomic_max, "min": atomic_min}

__all__ = ["atomic_add", "atomic_max", "atomic_min"]

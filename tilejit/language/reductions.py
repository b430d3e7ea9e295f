"""Reductions and scans over tiles: ``T.reduce_sum | reduce_max | reduce_min |
reduce_abssum | reduce_absmax`` and ``T.cumsum``.

The bodies are the simulation semantics; the GPU lowering is ``lowering/reductions.py``.
``dst`` has ``src``'s shape without ``dim`` (or with it kept as 1). Values are converted
to ``dst``'s dtype before they are combined. With ``clear=False`` the result is combined
with ``dst``'s previous values, once per element. ``reduce_max``/``reduce_min`` ignore
NaN (as ``T.max``/``T.min`` and PTX ``max``/``min`` do): the result is NaN only when
every value is.
"""
from __future__ import annotations

import numpy as np

from tilejit.language.dtypes import bfloat16

_COMBINE = {"sum": np.add, "max": np.fmax, "min": np.fmin, "abssum": np.add,
            "absmax": np.fmax}


def _values(src, dst):
    data = np.asarray(src.data)
    target = np.float32 if dst.dtype == bfloat16 else dst.dtype.numpy
    with np.errstate(all="ignore"):
        return data.astype(target)


def _reduce(op, src, dst, dim, clear):
    from tilejit.sim.runtime import _to_storage
    dim = dim % src.data.ndim
    values = _values(src, dst)
    if op in ("abssum", "absmax"):
        values = np.abs(values)
    out = _COMBINE[op].reduce(values, axis=dim)
    if dst.data.ndim == src.data.ndim:
        out = np.expand_dims(out, dim)
    if out.shape != dst.data.shape:
        raise ValueError(f"T.reduce_{op}: dst has shape {dst.data.shape}, expected "
                         f"{out.shape} (src {src.data.shape} without dim {dim})")
    if not clear:
        out = _COMBINE[op](dst.data.astype(out.dtype), out)
    dst.data[...] = _to_storage(out, dst.dtype, dst.data.dtype)


def reduce_sum(src, dst, dim=-1, clear=True):
    """dst = Σ src along dim."""
    _reduce("sum", src, dst, dim, clear)


def reduce_max(src, dst, dim=-1, clear=True):
    """dst = max of src along dim (NaN ignored)."""
    _reduce("max", src, dst, dim, clear)


def reduce_min(src, dst, dim=-1, clear=True):
    """dst = min of src along dim (NaN ignored)."""
    _reduce("min", src, dst, dim, clear)


def reduce_abssum(src, dst, dim=-1, clear=True):
    """dst = Σ |src| along dim."""
    _reduce("abssum", src, dst, dim, clear)


def reduce_absmax(src, dst, dim=-1, clear=True):
    """dst = max |src| along dim."""
    _reduce("absmax", src, dst, dim, clear)


def cumsum(src, dst=None, dim=-1, reverse=False):
    """Inclusive prefix sum of src along dim into dst (src itself when dst is None);
    ``reverse=True`` sums from the end."""
    from tilejit.sim.runtime import _to_storage
    dst = src if dst is None else dst
    dim = dim % src.data.ndim
    values = _values(src, dst)
    if reverse:
        out = np.flip(np.cumsum(np.flip(values, dim), axis=dim, dtype=values.dtype), dim)
    else:
        out = np.cumsum(values, axis=dim, dtype=values.dtype)
    dst.data[...] = _to_storage(out, dst.dtype, dst.data.dtype)

"""Atomics: ``T.atomic_add | atomic_max | atomic_min(dst, value, return_prev=False)``.

Two forms (the front end tells them apart in the source, ``frontend/tile_operands.py``):

- element: ``dst`` is one element, ``C[i, j]`` of a global tensor or ``S[i]`` of a shared
  tile. The front end rewrites the call to ``__tj_atomic_add(C, (i, j), v, return_prev,
  per_lane)`` (simulated by ``element_atomic`` in ``sim/semantics.py``). Inside a
  ``T.Parallel`` each iteration performs its atomic once; outside one, the block
  performs it once (thread 0 on the GPU), and ``return_prev=True`` is then a compile
  error.
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

from tilejit.language._semantics import meaning

OPS = ("add", "max", "min")
# the element dtypes atomics support
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint32", "uint64")


def atomic_add(dst, value, return_prev=False):
    """``dst += value`` atomically: ``dst`` an element (``C[i, j]``, a global tensor or a
    shared tile) or a region (``C[r0:r1, c0:c1]``) with a tile ``value``. With
    ``return_prev=True`` (element form) returns the element's previous value."""
    return meaning("atomic_add")(dst, value, return_prev)


def atomic_max(dst, value, return_prev=False):
    """``dst = max(dst, value)`` atomically (a NaN operand is ignored, as ``T.max``)."""
    return meaning("atomic_max")(dst, value, return_prev)


def atomic_min(dst, value, return_prev=False):
    """``dst = min(dst, value)`` atomically (a NaN operand is ignored, as ``T.min``)."""
    return meaning("atomic_min")(dst, value, return_prev)


FUNCTIONS = {"add": atomic_add, "max": atomic_max, "min": atomic_min}

__all__ = ["atomic_add", "atomic_max", "atomic_min"]

"""Warp-level primitives for per-thread code: ``T.warp_reduce_sum | max | min | bitand |
bitor(value)`` (every lane of the warp gets the reduction of the warp's 32 values) and
``T.shfl_xor | shfl_down | shfl_up(value, delta, width=32)``, ``T.shfl_sync(value,
src_lane, width=32)`` (a lane reads the value of another lane of its ``width``-lane
segment; ``shfl_down``/``shfl_up`` past the segment's end keep the lane's own value),
as TileLang spells them.

Every lane of the warp must reach the call (the full mask): under a branch that some
lanes of a warp skip the GPU's result is undefined, and the simulator reports it.
Declarations: the GPU lowering is ``codegen/lowering/warp.py`` (``shfl.sync``, a
butterfly for the reductions), the simulator's meaning ``sim/warp.py``.
"""
from __future__ import annotations

from tilejit.language._semantics import meaning

FULL_MASK = 0xFFFFFFFF


def warp_reduce_sum(value):
    """The sum of ``value`` over the 32 lanes of the warp, in every lane."""
    return meaning("warp_reduce_sum")(value)


def warp_reduce_max(value):
    """The max of ``value`` over the warp's lanes (NaN ignored, as T.max), in every lane."""
    return meaning("warp_reduce_max")(value)


def warp_reduce_min(value):
    """The min of ``value`` over the warp's lanes (NaN ignored, as T.min), in every lane."""
    return meaning("warp_reduce_min")(value)


def warp_reduce_bitand(value):
    """The bitwise and of an integer ``value`` over the warp's lanes, in every lane."""
    return meaning("warp_reduce_bitand")(value)


def warp_reduce_bitor(value):
    """The bitwise or of an integer ``value`` over the warp's lanes, in every lane."""
    return meaning("warp_reduce_bitor")(value)


def shfl_xor(value, delta, width=32, mask=FULL_MASK):
    """The value of lane ``lane ^ delta`` (within the lane's ``width``-lane segment)."""
    return meaning("shfl_xor")(value, delta, width, mask)


def shfl_down(value, delta, width=32, mask=FULL_MASK):
    """The value of lane ``lane + delta`` of the segment; the lane's own past its end."""
    return meaning("shfl_down")(value, delta, width, mask)


def shfl_up(value, delta, width=32, mask=FULL_MASK):
    """The value of lane ``lane - delta`` of the segment; the lane's own before its start."""
    return meaning("shfl_up")(value, delta, width, mask)


def shfl_sync(value, src_lane, width=32, mask=FULL_MASK):
    """The value of lane ``src_lane`` (mod ``width``) of the lane's segment."""
    return meaning("shfl_sync")(value, src_lane, width, mask)

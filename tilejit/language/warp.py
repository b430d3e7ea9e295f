"""Warp-level primitives for per-thread code: ``T.warp_reduce_sum | max | min | bitand |
bitor(value)`` (every lane of the warp gets the reduction of the warp's 32 values) and
``T.shfl_xor | shfl_down | shfl_up(value, delta, width=32)``, ``T.shfl_sync(value,
src_lane, width=32)`` (a lane reads the value of another lane of its ``width``-lane
segment; ``shfl_down``/``shfl_up`` past the segment's end keep the lane's own value),
as TileLang spells them; the votes ``T.any_sync | all_sync | ballot_sync(predicate,
mask=0xFFFFFFFF)``, ``T.ballot(predicate)``, ``T.activemask()``, the matches
``T.match_any_sync | match_all_sync(value, mask=0xFFFFFFFF)``, ``T.sync_warp(mask)``, the
block barriers
that reduce a predicate ``T.syncthreads_count | syncthreads_and | syncthreads_or
(predicate)`` and the bit searches ``T.__ffs(value)``, ``T.__fns(mask, base, offset)``.

Every lane of the warp must reach the call (the full mask): under a branch that some
lanes of a warp skip the GPU's result is undefined, and the simulator reports it. A
vote's lanes are those of its mask: each lane that calls it must be in its mask, and
every lane of the mask must call it (with the same mask). A predicate block barrier is
reached by every thread of the block, as ``T.sync_threads()``.
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


def any_sync(predicate, mask=FULL_MASK):
    """Non-zero (int32 1) in the lanes of ``mask`` when any of them has a non-zero integer
    or boolean ``predicate`` (PTX ``vote.sync.any.pred``), else 0."""
    return meaning("any_sync")(predicate, mask)


def all_sync(predicate, mask=FULL_MASK):
    """Non-zero (int32 1) when every lane of ``mask`` has a non-zero ``predicate``
    (``vote.sync.all.pred``), else 0."""
    return meaning("all_sync")(predicate, mask)


def ballot_sync(predicate, mask=FULL_MASK):
    """A uint64 whose bit ``n`` is set when lane ``n`` of the warp is in ``mask`` and its
    ``predicate`` is non-zero (``vote.sync.ballot.b32``, zero-extended: the upper 32 bits
    are 0)."""
    return meaning("ballot_sync")(predicate, mask)


def ballot(predicate):
    """``T.ballot_sync(predicate)`` over the whole warp."""
    return meaning("ballot")(predicate)


def match_any_sync(value, mask=FULL_MASK):
    """A uint32 whose bit ``n`` is set when lane ``n`` is in ``mask`` and its ``value``
    equals this lane's (``match.any.sync``; an integer or float value of 32 or 64 bits,
    compared bit for bit)."""
    return meaning("match_any_sync")(value, mask)


def match_all_sync(value, mask=FULL_MASK):
    """``mask`` (a uint32) when every lane of ``mask`` has the same ``value``, else 0
    (``match.all.sync``; TileLang drops its predicate output: it is ``result != 0``)."""
    return meaning("match_all_sync")(value, mask)


def activemask():
    """A uint64 whose bit ``n`` is set when lane ``n`` of the warp runs this call
    (``activemask.b32``, zero-extended)."""
    return meaning("activemask")()


def sync_warp(mask=FULL_MASK):
    """``__syncwarp(mask)``: the lanes of ``mask`` wait for each other, and their memory
    accesses before it are seen by each other after it (``bar.warp.sync``). Each lane that
    calls it must be in its mask, and every lane of the mask must call it."""
    return meaning("sync_warp")(mask)


def syncthreads_count(predicate):
    """A block barrier that returns (int32) how many of the block's threads have a
    non-zero ``predicate`` (``bar.red.popc.u32``)."""
    return meaning("syncthreads_count")(predicate)


def syncthreads_and(predicate):
    """A block barrier that returns non-zero (int32 1) when every thread of the block has
    a non-zero ``predicate`` (``bar.red.and.pred``), else 0."""
    return meaning("syncthreads_and")(predicate)


def syncthreads_or(predicate):
    """A block barrier that returns non-zero (int32 1) when some thread of the block has
    a non-zero ``predicate`` (``bar.red.or.pred``), else 0."""
    return meaning("syncthreads_or")(predicate)


def __ffs(value):
    """The one-based position (int32) of the lowest set bit of an integer ``value``, 0
    when it is 0 (CUDA's ``__ffs``/``__ffsll``)."""
    return meaning("__ffs")(value)


def __fns(mask, base, offset):
    """The position (uint32) of the ``offset``-th set bit of the 32-bit ``mask`` counted
    from bit ``base`` upwards (``offset`` > 0) or downwards (< 0); with ``offset`` 0,
    ``base`` when that bit is set; 0xFFFFFFFF when there is none (PTX ``fns.b32``)."""
    return meaning("__fns")(mask, base, offset)

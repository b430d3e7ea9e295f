"""The simulator's meaning of the warp primitives (``language/warp.py``).

In a kernel that reads its thread index the block runs lane-wise (``threads.py``): a
value is an array over the block's threads, and lane ``t`` of warp ``t // 32`` is
element ``t``. The reductions combine in the GPU's order (a butterfly: lane ``l`` adds
lane ``l ^ 16``, then ``l ^ 8`` … ``l ^ 1``), so floating-point sums agree with the
device bit for bit. In a kernel that does not, every thread holds the same value, and
the primitives act on 32 copies of it. A primitive under a branch that some threads skip
is a ``ThreadCodeError``: on the GPU the skipped lanes' values are undefined.
"""
from __future__ import annotations

import numpy as np

from tilejit.sim.runtime import STATE
from tilejit.sim.threads import ThreadCodeError, _active
from tilejit.sim.runtime import _caller_location

WARP = 32


def _lanes(value, name):
    lanes = STATE.lanes or WARP
    active = _active() if STATE.lanes else None
    if active is not None and not np.all(active):
        raise ThreadCodeError(
            f"T.{name} inside a branch that depends on the thread index: every lane of the "
            f"warp must reach a warp shuffle (the skipped lanes' values are undefined on "
            f"the GPU){_caller_location(3)}")
    array = np.asarray(value)
    return np.broadcast_to(array, (lanes,)).copy(), STATE.lanes == 0


def _result(values, uniform):
    return values[0].item() if uniform else values


def _width(width, name):
    if not isinstance(width, (int, np.integer)) or width not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"T.{name}: width must be a power of two up to 32, got {width!r}")
    return int(width)


def _butterfly(name, combine):
    def reduce(value):
        x, uniform = _lanes(value, f"warp_reduce_{name}")
        lane = np.arange(x.shape[0])
        with np.errstate(all="ignore"):
            for offset in (16, 8, 4, 2, 1):
                x = combine(x, x[lane ^ offset]).astype(x.dtype)
        return _result(x, uniform)
    reduce.__name__ = f"warp_reduce_{name}"
    return reduce


def _shuffle(name, source):
    def shuffle(value, delta, width=WARP, mask=0xFFFFFFFF):
        x, uniform = _lanes(value, name)
        w = _width(width, name)
        lane = np.arange(x.shape[0])
        d = np.broadcast_to(np.asarray(delta, dtype=np.int64), lane.shape)
        return _result(x[source(lane, d, w)], uniform)
    shuffle.__name__ = name
    return shuffle


def _xor(lane, d, w):
    return (lane // w) * w + ((lane % w) ^ (d % w))


def _down(lane, d, w):
    return np.where(lane % w + d < w, lane + d, lane)


def _up(lane, d, w):
    return np.where(lane % w >= d, lane - d, lane)


def _idx(lane, d, w):
    return (lane // w) * w + d % w


MEANINGS = {
    "warp_reduce_sum": _butterfly("sum", np.add),
    "warp_reduce_max": _butterfly("max", np.fmax),
    "warp_reduce_min": _butterfly("min", np.fmin),
    "warp_reduce_bitand": _butterfly("bitand", np.bitwise_and),
    "warp_reduce_bitor": _butterfly("bitor", np.bitwise_or),
    "shfl_xor": _shuffle("shfl_xor", _xor),
    "shfl_down": _shuffle("shfl_down", _down),
    "shfl_up": _shuffle("shfl_up", _up),
    "shfl_sync": _shuffle("shfl_sync", _idx),
}

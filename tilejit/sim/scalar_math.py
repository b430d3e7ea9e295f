"""What ``language/scalar_math.py``'s functions mean in the simulator: numpy, in the
operands' type as ``semantics._math`` computes (float16 in float32, rounded back).

sin, cos and tan (and the hyperbolic and inverse trigonometric functions, atan2 and
hypot) are computed in float64 and rounded to float32, then to the operand's type: the
GPU computes them in double arithmetic (after an exact reduction, for the trigonometry)
and rounds the same way, so the two agree to the last bit but for the rare result that
falls on a rounding boundary of float64's. They take float32 and the half types; float64
is a ``TypeError`` here as it is a compile error on the GPU.
"""
from __future__ import annotations

import numpy as np

from tilejit.language.scalar_math import ROUNDING_MODES
from tilejit.sim.semantics import _math, _math_dtypes


def _trig(name, fn):
    def run(x):
        compute, out = _math_dtypes(x)
        if compute == np.float64:
            raise TypeError(f"T.{name}: float64 is not supported (float32, float16 and "
                            f"bfloat16 are)")
        with np.errstate(all="ignore"):
            r = fn(np.asarray(x, dtype=np.float64)).astype(np.float32).astype(out)
        return r[()] if r.ndim == 0 else r
    run.__name__ = name
    return run


def _ties_away(a):
    t = np.trunc(a)
    # a − trunc(a) is exact: no rounding of a + 0.5
    return np.where(np.abs(a - t) >= 0.5, t + np.sign(a), t)


def round(x, rounding_mode="ties-to-even"):  # noqa: A001 - TileLang's name
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"T.round: rounding_mode must be one of {ROUNDING_MODES}, got "
                         f"{rounding_mode!r}")
    return _math(np.rint if rounding_mode == "ties-to-even" else _ties_away, x)


def _integer(name, x):
    a = np.asarray(x)
    if a.dtype.kind not in "iu" and type(x) is not int:
        raise TypeError(f"T.{name} takes an integer, got {a.dtype}")
    if type(x) is int:
        a = np.asarray(x, np.int64 if not -2**31 <= x < 2**31 else np.int32)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64), 8 * a.dtype.itemsize


def popcount(x):
    u, _ = _integer("popcount", x)
    count = np.zeros(u.shape, np.int32)
    for bit in range(64):
        count += ((u >> np.uint64(bit)) & np.uint64(1)).astype(np.int32)
    return count[()] if count.ndim == 0 else count


def clz(x):
    u, width = _integer("clz", x)
    length = np.zeros(u.shape, np.int32)
    for bit in range(width):
        length = np.where((u >> np.uint64(bit)) != 0, bit + 1, length).astype(np.int32)
    r = (width - length).astype(np.int32)
    return r[()] if r.ndim == 0 else r


def _classify(fn):
    def run(x):
        r = np.asarray(fn(np.asarray(x)))
        return r[()] if r.ndim == 0 else r
    return run


def _in_double(name, fn):
    """float32 and the half types computed in float64 and rounded to float32, then to
    the operand's type, as the GPU does; float64 a ``TypeError`` as on the GPU."""
    def run(*xs):
        compute, out = _math_dtypes(*xs)
        if compute == np.float64:
            raise TypeError(f"T.{name}: float64 is not supported (float32, float16 and "
                            f"bfloat16 are)")
        with np.errstate(all="ignore"):
            r = np.asarray(fn(*(np.asarray(x, dtype=np.float64) for x in xs)))
            r = r.astype(np.float32).astype(out)
        return r[()] if r.ndim == 0 else r
    run.__name__ = name
    return run


_ELEMENTARY = {"sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
               "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
               "atanh": np.arctanh, "atan2": np.arctan2, "hypot": np.hypot,
               "fmod": np.fmod}

MEANINGS = {
    **{name: _in_double(name, fn) for name, fn in _ELEMENTARY.items()},
    "sin": _trig("sin", np.sin), "cos": _trig("cos", np.cos), "tan": _trig("tan", np.tan),
    "exp10": lambda x: _math(lambda a: np.power(a.dtype.type(10), a), x),
    "log10": lambda x: _math(np.log10, x),
    "log1p": lambda x: _math(np.log1p, x),
    "trunc": lambda x: _math(np.trunc, x),
    "nearbyint": lambda x: _math(np.rint, x),
    "round": round,
    "isnan": _classify(np.isnan), "isinf": _classify(np.isinf),
    "isfinite": _classify(np.isfinite),
    "copysign": lambda x, y: _math(np.copysign, x, y),
    "popcount": popcount, "clz": clz,
}

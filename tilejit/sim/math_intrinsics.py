"""What ``language/math_intrinsics.py``'s functions mean in the simulator.

The rounded operations on float32 and float64 are computed exactly (Python's
``Fraction``; square roots by comparing squares) and rounded once by the mode, element
by element: the definition the GPU's ``add.rz.f32``, ``fma.rp.f64``, ... implement. On
float16 (and bfloat16, which the simulator holds in float32) they compute in float32,
as the GPU does, and round to the type (bfloat16: when stored). ``ieee_frsqrt`` is
float64's square root and quotient rounded to float32. The fast functions are the
accurate ones here (module docstring of the language's side).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tilejit.language.math_intrinsics import half_mode_message
from tilejit.sim.semantics import _math_dtypes, exp, log, log2
from tilejit.sim.scalar_math import MEANINGS as _SCALAR


# -- one rounding of an exact value --------------------------------------------------------
def _overflow_value(dtype) -> Fraction:
    """2^(emax+1): where an infinity stands when rounding to nearest (its bit pattern is
    even, as that power's significand would be)."""
    return Fraction(2) ** (np.finfo(dtype).maxexp)


def _value(v, big: Fraction) -> Fraction:
    if np.isfinite(v):
        return Fraction(float(v))
    return big if v > 0 else -big


def _even(v) -> bool:
    return int(np.asarray(v).view(f"u{v.dtype.itemsize}")) % 2 == 0


def _pick(exact, lo, hi, mode: str, big: Fraction):
    """The rounding by ``mode`` of ``exact`` between its neighbours ``lo`` < ``hi``."""
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if exact > 0 else hi
    below, above = exact - _value(lo, big), _value(hi, big) - exact
    if below != above:
        return lo if below < above else hi
    return lo if _even(lo) else hi


def _neighbours(exact: Fraction, dtype, compare):
    """The largest ``lo`` and the smallest ``hi`` of ``dtype`` with ``compare(lo) <= 0 <=
    compare(hi)``, starting from the nearest value float64 gives."""
    try:
        start = float(exact)
    except OverflowError:
        start = float("inf") if exact > 0 else float("-inf")
    with np.errstate(all="ignore"):
        c = dtype.type(start)
    lo = hi = c
    while compare(lo) > 0:
        lo = np.nextafter(lo, dtype.type(-np.inf))
    while compare(hi) < 0:
        hi = np.nextafter(hi, dtype.type(np.inf))
    return lo, hi


def _round_exact(exact: Fraction, dtype, mode: str):
    big = _overflow_value(dtype)
    if abs(exact) >= big:         # past the largest finite value by at least half an ulp
        up = exact > 0
        toward_infinity = mode == "rn" or mode == ("ru" if up else "rd")
        limit = dtype.type(np.inf) if toward_infinity else np.finfo(dtype).max
        return limit if up else -limit
    lo, hi = _neighbours(exact, dtype, lambda v: (_value(v, big) > exact) -
                         (_value(v, big) < exact))
    return lo if lo == hi else _pick(exact, lo, hi, mode, big)


def _zero(dtype, negative: bool):
    return dtype.type(-0.0 if negative else 0.0)


# -- the operations on one element ---------------------------------------------------------
def _sum_zero_sign(terms_zero_signs, mode) -> bool:
    """IEEE's sign of an exact zero sum: the common sign of zero terms; otherwise + (−
    when rounding down)."""
    if terms_zero_signs is not None and len(set(terms_zero_signs)) == 1:
        return terms_zero_signs[0]
    return mode == "rd"


def _element(op: str, mode: str, dtype, *xs):
    xs = [dtype.type(x) for x in xs]
    if not all(np.isfinite(x) for x in xs) or (op in ("div", "rcp") and xs[-1] == 0) or \
            (op == "sqrt" and xs[0] < 0):
        with np.errstate(all="ignore"):   # specials: the same for every rounding mode
            return dtype.type(_NUMPY[op](*xs))
    f = [Fraction(float(x)) for x in xs]
    neg = [bool(np.signbit(x)) for x in xs]
    if op == "sqrt":
        if f[0] == 0:
            return xs[0]                                   # √±0 = ±0
        big = _overflow_value(dtype)
        # v compared with √x by v² against x (v ≥ 0 here)
        lo, hi = _neighbours(Fraction(float(np.sqrt(np.float64(xs[0])))), dtype,
                             lambda v: (_value(v, big) ** 2 > f[0]) -
                                       (_value(v, big) ** 2 < f[0]) if v >= 0 else -1)
        if lo == hi:
            return lo
        if mode == "rn":
            mid = (_value(lo, big) + _value(hi, big)) / 2
            return lo if f[0] < mid * mid else hi          # never equal: √x is not a midpoint
        return _pick(None, lo, hi, "rd" if mode in ("rd", "rz") else "ru", big)
    if op in ("add", "sub"):
        b, nb = (f[1], neg[1]) if op == "add" else (-f[1], not neg[1])
        exact, zero_signs = f[0] + b, ([neg[0], nb] if f[0] == 0 and b == 0 else None)
    elif op == "mul":
        exact, zero_signs = f[0] * f[1], [neg[0] != neg[1]]
    elif op == "fma":
        p, pn = f[0] * f[1], neg[0] != neg[1]
        exact = p + f[2]
        zero_signs = [pn, neg[2]] if p == 0 and f[2] == 0 else None
    elif op == "div":
        exact, zero_signs = f[0] / f[1], [neg[0] != neg[1]]
    else:                                                  # rcp
        exact, zero_signs = 1 / f[0], [neg[0]]
    if exact == 0:
        return _zero(dtype, _sum_zero_sign(zero_signs, mode) if op in ("add", "sub", "fma")
                     else zero_signs[0])
    return _round_exact(exact, dtype, mode)


_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "fma": lambda a, b, c: a * b + c, "rcp": lambda a: 1 / a, "sqrt": np.sqrt}


def _half_in_float32(op: str, *xs):
    """float16's operations: float32's, rounded to float16 (numpy rounds to nearest)."""
    a = [np.asarray(x, dtype=np.float32) for x in xs]
    with np.errstate(all="ignore"):
        r = np.float32(1) / a[0] if op == "rcp" else (
            a[0] * a[1] + a[2] if op == "fma" else _NUMPY[op](*a))
    return np.asarray(r, dtype=np.float32).astype(np.float16)


def _ieee(name: str, op: str):
    def run(*args):
        *xs, mode = args
        compute, out = _math_dtypes(*xs)
        if out == np.float16:
            if mode != "rn":
                raise ValueError(half_mode_message(name, "float16", mode))
            r = _half_in_float32(op, *xs)
        else:
            dtype = np.dtype(out)
            arrays = np.broadcast_arrays(*(np.asarray(x, dtype=dtype) for x in xs))
            r = np.empty(arrays[0].shape, dtype)
            for index in np.ndindex(r.shape):
                r[index] = _element(op, mode, dtype, *(a[index] for a in arrays))
        return r[()] if r.ndim == 0 else r
    run.__name__ = name
    return run


def ieee_frsqrt(x):
    compute, out = _math_dtypes(x)
    if out == np.float64:
        raise TypeError("T.ieee_frsqrt: frsqrt is not supported for float64 (float32, "
                        "float16 and bfloat16 are)")
    with np.errstate(all="ignore"):
        r = (1 / np.sqrt(np.asarray(x, dtype=np.float64))).astype(np.float32).astype(out)
    return r[()] if r.ndim == 0 else r


def _reciprocal(x):
    """1/x in the operand's type (the GPU's approximation is within an ulp of it;
    float64 divides exactly, as its ``rcp.rn.f64``)."""
    a = np.asarray(x)
    out = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
    wide = np.float64 if out == np.float64 else np.float32
    with np.errstate(divide="ignore", over="ignore"):
        r = (wide(1) / a.astype(wide)).astype(out)
    return r[()] if r.ndim == 0 else r


MEANINGS = {
    **{name: _ieee(name, op) for name, op in (
        ("ieee_add", "add"), ("ieee_sub", "sub"), ("ieee_mul", "mul"), ("ieee_fdiv", "div"),
        ("ieee_fmaf", "fma"), ("ieee_frcp", "rcp"), ("ieee_fsqrt", "sqrt"))},
    "ieee_frsqrt": ieee_frsqrt,
    "__exp": exp, "__exp10": _SCALAR["exp10"], "__log": log, "__log2": log2,
    "__log10": _SCALAR["log10"], "__sin": _SCALAR["sin"], "__cos": _SCALAR["cos"],
    "__tan": _SCALAR["tan"], "fast_rcp": _reciprocal,
}

"""TileLang's packed x2 math: ``T.add2``, ``T.sub2``, ``T.mul2``, ``T.fma2``, ``T.max2``,
``T.min2``, ``T.abs2`` on float32x2, float16x2 and bfloat16x2 values (CUDA's
``__hadd2``, ``fma.rn.f16x2``, ``fmax``, ...).

tilejit has no vector dtypes: a packed value is the two lanes of a vector statement,
written as TileLang's programs write it, ``C[T.Ramp(i * 2, 1, 2)] =
T.add2(A[T.Ramp(i * 2, 1, 2)], B[T.Ramp(i * 2, 1, 2)])``; the front end makes that
statement each lane's (``frontend/ramp_vectors.py``), so each call here is one lane's
operation: the IEEE result rounded to nearest (``T.ieee_add``, ``T.ieee_fmaf``; float16
and bfloat16 computed in float32 and rounded to the type, which is exact for add, sub
and mul; ``fma2`` on float16 rounds once, as ``__hfma2``, through float32 rounded to
odd; on bfloat16 it is float32's fused result rounded again, where ``__hfma2`` rounds
once: they can differ by an ulp in rare halfway cases), the larger or
smaller of two (a NaN loses and +0 is above −0, as PTX ``max``/``min``:
``language/minmax.py``) or the magnitude. A call outside a
statement of 2 lanes, an operand that is not a vector of the statement, and operands of
different dtypes or of another dtype are CompileErrors. A float literal
(``T.Broadcast(1.0, 2)``) takes its partners' type. The simulator holds bfloat16 in
float32: a bfloat16 packed result used inside a larger expression is rounded to
bfloat16 on the GPU and kept in float32 there until it is stored.
"""
from __future__ import annotations

import numpy as np

from tilejit.language import numerics as _num
from tilejit.language.math_intrinsics import ieee_add, ieee_fmaf, ieee_mul, ieee_sub

PACKED_DTYPES = ("float32", "float16", "bfloat16")
# name -> (number of values, the scalar operation each lane is)
PACKED_OPS = {"add2": (2, "ieee_add"), "sub2": (2, "ieee_sub"), "mul2": (2, "ieee_mul"),
              "fma2": (3, "ieee_fmaf"), "max2": (2, "max"), "min2": (2, "min"),
              "abs2": (1, "abs")}


def expected(name: str, dtypes) -> str | None:
    """The error of T.``name`` on values of ``dtypes`` (names), TileLang's words; None if
    they are one packed dtype's."""
    for d in dtypes:
        if d not in PACKED_DTYPES:
            return (f"T.{name}: Expected dtype in ['bfloat16x2', 'float16x2', 'float32x2'] "
                    f"(a statement of 2 lanes of one of those types), got '{d}'")
    if len(set(dtypes)) > 1:
        return (f"T.{name}: Expected all packed x2 arguments to have the same dtype, got "
                f"{[f'{d}x2' for d in dtypes]}")
    return None


def _checked(name, *values):
    # a float literal (T.Broadcast(1.0, 2)) takes its partners' type, as in the compiler
    typed = [np.asarray(v).dtype.name for v in values if type(v) is not float]
    message = expected(name, typed or ["float32"])
    if message is not None:
        raise TypeError(message)


def add2(x, y):
    """x + y in each lane."""
    _checked("add2", x, y)
    return ieee_add(x, y)


def sub2(x, y):
    """x − y in each lane."""
    _checked("sub2", x, y)
    return ieee_sub(x, y)


def mul2(x, y):
    """x · y in each lane."""
    _checked("mul2", x, y)
    return ieee_mul(x, y)


def fma_half_odd(a, b, c):
    """x · y + z of float16 values as float32 rounded to odd: the product is exact in
    float32, the sum's rounding error comes from Knuth's two-sum, and an inexact sum with
    an even last bit moves one ulp toward the exact value. Rounded to float16 (nearest)
    after, that is the fused result rounded once (float32 carries more than 11 + 2 bits),
    as ``__hfma2``. The GPU's lowering computes the same (``lowering/math_intrinsics``)."""
    a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a * b
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)
        bits = np.asarray(s, np.float32).view(np.uint32)
        odd = (e != 0) & ((bits & 1) == 0) & np.isfinite(s)
        toward = np.where((e > 0) == (s > 0), bits + np.uint32(1), bits - np.uint32(1))
        return np.where(odd, toward, bits).astype(np.uint32).view(np.float32)


def fma2(x, y, z):
    """x · y + z with one rounding in each lane (float32 and float16; bfloat16, which the
    simulator holds in float32, through float32's fused result rounded again)."""
    _checked("fma2", x, y, z)
    if np.asarray(x).dtype == np.float16:
        r = fma_half_odd(x, y, z).astype(np.float16)
        return r[()] if r.ndim == 0 else r
    return ieee_fmaf(x, y, z)


def max2(x, y):
    """The larger in each lane (a NaN loses)."""
    _checked("max2", x, y)
    return _num.maximum(x, y)


def min2(x, y):
    """The smaller in each lane (a NaN loses)."""
    _checked("min2", x, y)
    return _num.minimum(x, y)


def abs2(x):
    """|x| in each lane."""
    _checked("abs2", x)
    return np.abs(x)

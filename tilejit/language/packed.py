"""TileLang's packed x2 math: ``T.add2``, ``T.sub2``, ``T.mul2``, ``T.fma2``, ``T.max2``,
``T.min2``, ``T.abs2`` on float32x2, float16x2 and bfloat16x2 values (CUDA's
``__hadd2``, ``fma.rn.f16x2``, ``fmax``, ...).

tilejit has no vector dtypes: a packed value is the two lanes of a vector statement,
written as TileLang's programs write it, ``C[T.Ramp(i * 2, 1, 2)] =
T.add2(A[T.Ramp(i * 2, 1, 2)], B[T.Ramp(i * 2, 1, 2)])``; the front end makes that
statement each lane's (``frontend/ramp_vectors.py``), so each call here is one lane's
operation: the IEEE result rounded to nearest (``T.ieee_add``, ``T.ieee_fmaf``; float16
and bfloat16 computed in float32 and rounded to the type, which is exact for add, sub
and mul; for ``fma2`` it is float32's fused result rounded again, where CUDA's
``__hfma2`` rounds once: they can differ by an ulp in rare halfway cases), the larger or
smaller of two (a NaN loses, as CUDA's ``fmax2``) or the magnitude. A call outside a
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


def fma2(x, y, z):
    """x · y + z with one rounding in each lane."""
    _checked("fma2", x, y, z)
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

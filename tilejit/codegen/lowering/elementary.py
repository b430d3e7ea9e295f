"""The hyperbolic and inverse trigonometric functions (``T.sinh``, ``cosh``, ``asin``,
``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh``, ``atan2``), ``hypot`` and ``fmod``
as LLVM IR.

float32 (and the half types, through float32) is computed in float64 with the double
routines of ``math.py`` and ``scalar_math.py`` and rounded once to float: within an ulp
of the exact value (the host accuracy tests measure it). float64 operands are refused by
the typing, as for ``T.sin``.

- sinh: a Taylor polynomial below |x| = 1/2 (no cancellation), ``(e^a − e^−a)/2`` above;
  cosh: ``(e^a + e^−a)/2``.
- atan: for |x| > 1, ``π/2 − atan(1/|x|)``; then two half-angle steps
  ``t/(1 + √(1 + t²))`` bring the argument under tan(π/16) and 4·atan(t) is its series.
  asin: ``atan(x/√((1 − x)(1 + x)))``; acos: ``2·atan(√((1 − x)/(1 + x)))``;
  atan2: C99's special cases, then ``atan(|y|/|x|)`` placed in the quadrant.
- asinh: ``log1p(a + a²/(1 + √(1 + a²)))``; acosh: ``log1p(t + √(t(t + 2)))`` with
  t = x − 1 (exact); atanh: ``log1p(2x/(1 − x))/2``.
- hypot: ``√(x² + y²)`` (the squares exact in double, no overflow).
- fmod: exact (C's fmod), by a short loop of exact reductions in double.
"""
from __future__ import annotations

import math

from numba.core import types

from tilejit import language as T
from tilejit.codegen.lowering.math import F32, F64, _E, _in_float32, exp
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar_math import log1p

_ATAN_TERMS = 13            # the series to t^25: t ≤ tan(π/16) ≈ 0.199, t^27/27 < 2^-66


def _double(builder, x):
    return builder.fpext(x, F64) if x.type == F32 else x


def _single(builder, d):
    return builder.fptrunc(d, F32)


def _atan_d(d: _E, x):
    """atan of a double (NaN, ±inf and ±0 included)."""
    a = d.fabs(x)
    big = d.gt(a, 1.0)
    t = d.sel(big, d.div(1.0, a), a)
    for _ in range(2):                                  # atan t = 2·atan(t/(1 + √(1+t²)))
        t = d.div(t, d.add(1.0, d.sqrt(d.fma(t, t, 1.0))))
    t2 = d.mul(t, t)
    series = d.poly(t2, [(-1) ** k / (2 * k + 1) for k in range(_ATAN_TERMS)])
    r = d.mul(4.0, d.mul(t, series))
    r = d.sel(big, d.sub(math.pi / 2, r), r)
    return d.sel(d.isnan(x), x, d.copysign(r, x))


def sinh(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    a = d.fabs(xd)
    a2 = d.mul(a, a)
    small = d.mul(a, d.poly(a2, [1.0 / math.factorial(2 * k + 1) for k in range(9)]))
    ea = exp(builder, a)
    large = d.mul(0.5, d.sub(ea, d.div(1.0, ea)))
    r = d.sel(d.lt(a, 0.5), small, large)
    return _single(builder, d.sel(d.isnan(xd), xd, d.copysign(r, xd)))


def cosh(builder, x, fast=False):
    d = _E(builder, F64)
    a = d.fabs(_double(builder, x))
    ea = exp(builder, a)
    return _single(builder, d.mul(0.5, d.add(ea, d.div(1.0, ea))))


def atan(builder, x, fast=False):
    return _single(builder, _atan_d(_E(builder, F64), _double(builder, x)))


def asin(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    root = d.sqrt(d.mul(d.sub(1.0, xd), d.add(1.0, xd)))    # NaN past ±1
    r = _atan_d(d, d.div(xd, root))                          # ±1: atan(±inf) = ±π/2
    return _single(builder, d.sel(d.gt(d.fabs(xd), 1.0), d.c(math.nan), r))


def acos(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    r = d.mul(2.0, _atan_d(d, d.sqrt(d.div(d.sub(1.0, xd), d.add(1.0, xd)))))
    return _single(builder, d.sel(d.gt(d.fabs(xd), 1.0), d.c(math.nan), r))


def asinh(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    a = d.fabs(xd)
    a2 = d.mul(a, a)
    r = log1p(builder, d.add(a, d.div(a2, d.add(1.0, d.sqrt(d.add(1.0, a2))))))
    r = d.sel(d.eq(a, math.inf), a, r)                       # inf/inf in the quotient
    return _single(builder, d.sel(d.isnan(xd), xd, d.copysign(r, xd)))


def acosh(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    t = d.sub(xd, 1.0)                                       # exact for a float x
    r = log1p(builder, d.add(t, d.sqrt(d.mul(t, d.add(t, 2.0)))))
    r = d.sel(d.eq(xd, math.inf), xd, r)
    return _single(builder, d.sel(d.lt(xd, 1.0), d.c(math.nan), r))


def atanh(builder, x, fast=False):
    d = _E(builder, F64)
    xd = _double(builder, x)
    r = d.mul(0.5, log1p(builder, d.div(d.mul(2.0, xd), d.sub(1.0, xd))))
    r = d.sel(d.gt(d.fabs(xd), 1.0), d.c(math.nan), r)
    return _single(builder, d.sel(d.eq(xd, 0.0), xd, r))    # ±0 keeps its sign


def atan2(builder, y, x, fast=False):
    """C99's atan2: the quadrant from the signs, π/4 multiples for infinities."""
    d = _E(builder, F64)
    yd, xd = _double(builder, y), _double(builder, x)
    ay, ax = d.fabs(yd), d.fabs(xd)
    x_negative = d.signbit(xd)                               # −0 counts as negative
    r = _atan_d(d, d.div(ay, ax))                            # 0 ≤ r ≤ π/2
    both_inf = d.b.and_(d.eq(ay, math.inf), d.eq(ax, math.inf))
    r = d.sel(both_inf, math.pi / 4, r)
    zeros = d.b.and_(d.eq(ay, 0.0), d.eq(ax, 0.0))
    r = d.sel(zeros, 0.0, r)                                 # 0/0: the quadrant decides
    r = d.sel(x_negative, d.sub(math.pi, r), r)
    r = d.copysign(r, yd)
    r = d.sel(d.b.or_(d.isnan(xd), d.isnan(yd)), d.c(math.nan), r)
    return _single(builder, r)


def hypot(builder, x, y, fast=False):
    d = _E(builder, F64)
    xd, yd = _double(builder, x), _double(builder, y)
    r = d.sqrt(d.fma(xd, xd, d.mul(yd, yd)))
    either_inf = d.b.or_(d.eq(d.fabs(xd), math.inf), d.eq(d.fabs(yd), math.inf))
    return _single(builder, d.sel(either_inf, math.inf, r))  # inf even with a NaN


def fmod(builder, x, y, fast=False):
    """C's fmod, exact: |x| reduced by multiples of |y| scaled by 2^k in double, each
    step's quotient under 2^28 so that ``q·d`` (28 + 24 bits) and ``r − q·d`` are exact
    (a quotient rounded up one is taken back by adding d); at most a dozen steps across
    float's exponent range. NaN for y = 0, x infinite or a NaN; x itself where |x| < |y|."""
    d = _E(builder, F64)
    i64 = d.f.ity
    xd, yd = _double(builder, x), _double(builder, y)
    ax, ay = d.fabs(xd), d.fabs(yd)

    def exponent(v):
        return builder.and_(builder.lshr(d.bits(v), i64(52)), i64(0x7FF))

    entry = builder.block
    loop = builder.append_basic_block("fmod.loop")
    done = builder.append_basic_block("fmod.done")
    builder.cbranch(d.ge(ax, ay), loop, done)               # false for NaN operands
    builder.position_at_end(loop)
    r = builder.phi(F64)
    r.add_incoming(ax, entry)
    k = builder.sub(builder.sub(exponent(r), exponent(ay)), i64(26))
    k = builder.select(builder.icmp_signed("<", k, i64(0)), i64(0), k)
    scaled = d.from_bits(builder.add(d.bits(ay), builder.shl(k, i64(52))))   # ay·2^k
    q = d._intrinsic("llvm.trunc.f64", d.div(r, scaled))
    rest = d.fma(d.neg(q), scaled, r)
    rest = d.sel(d.lt(rest, 0.0), d.add(rest, scaled), rest)
    r.add_incoming(rest, loop)
    tail = builder.block
    builder.cbranch(d.ge(rest, ay), loop, done)
    builder.position_at_end(done)
    result = builder.phi(F64)
    result.add_incoming(ax, entry)
    result.add_incoming(rest, tail)
    out = d.copysign(result, xd)
    bad = builder.or_(builder.or_(d.eq(ay, 0.0), d.eq(ax, math.inf)),
                      builder.or_(d.isnan(xd), d.isnan(yd)))
    return _single(builder, d.sel(bad, d.c(math.nan), out))


UNARY = {"sinh": sinh, "cosh": cosh, "atan": atan, "asin": asin, "acos": acos,
         "asinh": asinh, "acosh": acosh, "atanh": atanh}
BINARY = {"atan2": atan2, "hypot": hypot, "fmod": fmod}


def _register():
    for name, build in UNARY.items():
        def impl(context, builder, sig, args, build=build):
            return _in_float32(builder, sig.return_type, lambda x: build(builder, x), args)
        lower(getattr(T, name), types.Any)(impl)
    for name, build in BINARY.items():
        def impl2(context, builder, sig, args, build=build):
            return _in_float32(builder, sig.return_type,
                               lambda a, b: build(builder, a, b), args)
        lower(getattr(T, name), types.Any, types.Any)(impl2)


_register()

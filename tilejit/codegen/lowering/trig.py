"""``T.sin``, ``T.cos`` and ``T.tan`` on float (the half types widened to it) as LLVM IR.

The argument is reduced to ``x = q·π/2 + r`` with ``|r| ≤ π/4`` in double arithmetic,
exactly enough that the result, computed in double and rounded once to float, is within
an ulp of the correctly rounded one over the whole float range:

- ``|x| < 2^18``: Cody–Waite, ``q = rint(x·2/π)``, ``r = x − q·P1 − q·P2 − q·P3`` with
  π/2 split into two 33-bit heads and a double tail (``q·P1`` and ``q·P2`` are exact);
- larger finite ``x`` (a branch: rare in practice): Payne–Hanek. With ``x = m·2^e``
  (m the 24-bit significand), ``x·2/π mod 4`` needs only the 96 bits of 2/π from bit
  ``e − 1`` on: ``m·W mod 2^96`` (three 24×32-bit integer products) holds the quadrant in
  its top two bits and ``r/(π/2)`` in the 94 below, to about 2^-70.

Then ``sin r = r + r³·S(r²)`` and ``cos r = 1 + r²·C(r²)`` (Taylor to r¹⁵ / r¹⁶: below
10^-16 on |r| ≤ π/4), chosen and signed by the quadrant; ``tan`` is their quotient.
Special values: NaN for ±inf and NaN, ``sin(±0) = tan(±0) = ±0``. Fast math
(``fast_math=True``): the special function unit's ``sin.approx.f32`` / ``cos.approx.f32``
(absolute error about 2^-21 on |x| ≤ π, growing with |x|), ``tan`` their quotient.
float64 is refused at typing (``codegen/typing/scalar_math.py``).
"""
from __future__ import annotations

import math
from fractions import Fraction

from llvmlite import ir

from tilejit.codegen.lowering.math import F32, F64, I32, I64, _E, _round_bits

# ---------------------------------------------------------------------------------------
# π to 400 bits (Machin's formula in integers); 2/π's first 288 bits and π/2's splits
# ---------------------------------------------------------------------------------------
_PREC = 400


def _atan_inv(n: int) -> int:
    """atan(1/n)·2^_PREC, by its series in integers."""
    total, power, k, sign = 0, (1 << _PREC) // n, 1, 1
    while power:
        total += sign * (power // k)
        power //= n * n
        k += 2
        sign = -sign
    return total


_PI = Fraction(16 * _atan_inv(5) - 4 * _atan_inv(239), 1 << _PREC)
_HALF_PI = _PI / 2
_TABLE_WORDS = 10          # a zero word, then 2/π's bits 1…288 (bit 1 weighs 1/2)
_TWO_OVER_PI = int(Fraction(2) / _PI * 2 ** (32 * (_TABLE_WORDS - 1)))
TWO_OVER_PI_WORDS = [0] + [(_TWO_OVER_PI >> (32 * (_TABLE_WORDS - 1 - i))) & 0xFFFFFFFF
                           for i in range(1, _TABLE_WORDS)]

_P1 = _round_bits(_HALF_PI, 33)
_P2 = _round_bits(_HALF_PI - Fraction(_P1), 33)
_P3 = float(_HALF_PI - Fraction(_P1) - Fraction(_P2))
_TWO_OVER_PI_D = float(Fraction(2) / _PI)
_HALF_PI_D = float(_HALF_PI)
SMALL = 2.0 ** 18           # Cody–Waite below, Payne–Hanek above

_SIN = [float(Fraction((-1) ** k, math.factorial(2 * k + 1))) for k in range(1, 8)]
_COS = [float(Fraction((-1) ** k, math.factorial(2 * k))) for k in range(1, 9)]


def _table(builder):
    module = builder.module
    name = "__tj_two_over_pi"
    table = module.globals.get(name)
    if table is None:
        ty = ir.ArrayType(I32, _TABLE_WORDS)
        table = ir.GlobalVariable(module, ty, name)
        table.global_constant = True
        table.linkage = "internal"
        table.initializer = ir.Constant(ty, TWO_OVER_PI_WORDS)
    return table


def _cody_waite(d: _E, xd):
    """(r, q) for |x| < 2^18."""
    kd = d.sub(d.fma(xd, _TWO_OVER_PI_D, d.f.magic), d.f.magic)
    r = d.fma(d.neg(kd), _P1, xd)
    r = d.fma(d.neg(kd), _P2, r)
    r = d.fma(d.neg(kd), _P3, r)
    return r, d.b.fptosi(kd, I32)


def _payne_hanek(d: _E, x):
    """(r, q) for a finite float |x| ≥ 2^18 (garbage, not out of bounds, for inf/NaN)."""
    b = d.b
    ix = b.bitcast(x, I32)
    biased = b.and_(b.lshr(ix, I32(23)), I32(0xFF))
    m = b.zext(b.or_(b.and_(ix, I32(0x7FFFFF)), I32(0x800000)), I64)
    # the window of 2/π's bits from bit e − 1 (x = m·2^e, e = biased − 150): index
    # e + 30 in the table, whose first word is zero
    j0 = b.add(biased, I32(30 - 150))
    wi = b.lshr(j0, I32(5))
    sh = b.zext(b.and_(j0, I32(31)), I64)
    table = _table(b)

    def word(k):
        ptr = b.gep(table, [I32(0), b.add(wi, I32(k))], inbounds=True)
        return b.zext(b.load(ptr), I64)

    w = [word(k) for k in range(4)]

    def window(k):         # 32 bits of the window, from (w[k], w[k + 1]) shifted by sh
        pair = b.or_(b.shl(w[k], I64(32)), w[k + 1])
        return b.and_(b.lshr(b.shl(pair, sh), I64(32)), I64(0xFFFFFFFF))

    p0, p1, p2 = (b.mul(m, window(k)) for k in range(3))        # each below 2^56
    lo = b.add(p2, b.shl(p1, I64(32)))
    carry = b.zext(b.icmp_unsigned("<", lo, p2), I64)
    hi = b.trunc(b.add(b.add(p0, b.lshr(p1, I64(32))), carry), I32)
    q = b.lshr(hi, I32(30))
    frac = d.add(d.mul(b.uitofp(b.and_(hi, I32(0x3FFFFFFF)), F64), 2.0 ** -30),
                 d.mul(b.uitofp(lo, F64), 2.0 ** -94))
    up = d.ge(frac, 0.5)
    frac = d.sel(up, d.sub(frac, 1.0), frac)
    q = b.add(q, b.zext(up, I32))
    r = d.mul(frac, _HALF_PI_D)
    negative = b.icmp_signed("<", ix, I32(0))
    return d.sel(negative, d.neg(r), r), b.select(negative, b.neg(q), q)


def _reduce(builder, x):
    """(r as double, q mod 4 as i32) with x = q·π/2 + r."""
    d = _E(builder, F64)
    f = _E(builder, F32)
    big = f.ge(f.fabs(x), SMALL)
    with builder.if_else(big, likely=False) as (slow, fast):
        with slow:
            r_slow, q_slow = _payne_hanek(d, x)
            slow_block = builder.block
        with fast:
            r_fast, q_fast = _cody_waite(d, builder.fpext(x, F64))
            fast_block = builder.block
    r = builder.phi(F64)
    r.add_incoming(r_slow, slow_block)
    r.add_incoming(r_fast, fast_block)
    q = builder.phi(I32)
    q.add_incoming(q_slow, slow_block)
    q.add_incoming(q_fast, fast_block)
    return r, builder.and_(q, I32(3))


def _sin_cos_poly(d: _E, r):
    z = d.mul(r, r)
    s = d.fma(d.mul(r, z), d.poly(z, _SIN), r)
    c = d.fma(z, d.poly(z, _COS), 1.0)
    return s, c


def _finish(f: _E, x, result_d, keep_zero):
    out = f.b.fptrunc(result_d, F32)
    finite = f.lt(f.fabs(x), math.inf)
    out = f.sel(finite, out, f.nan())
    return f.sel(f.eq(x, 0.0), x, out) if keep_zero else out


def _quadrant(d: _E, q, values):
    """values[q] for q in 0…3."""
    b = d.b
    out = values[3]
    for k in (2, 1, 0):
        out = d.sel(b.icmp_unsigned("==", q, I32(k)), values[k], out)
    return out


def _check(x):
    if x.type != F32:
        raise TypeError(f"tilejit trig: float expected, got {x.type}")


def _sin_or_cos(builder, x, fast, cosine):
    _check(x)
    f = _E(builder, F32)
    if fast:
        return f._intrinsic(f"llvm.nvvm.{'cos' if cosine else 'sin'}.approx.f", x)
    d = _E(builder, F64)
    r, q = _reduce(builder, x)
    s, c = _sin_cos_poly(d, r)
    # quadrant q of the reduced argument: sin is s, c, -s, -c; cos is c, -s, -c, s
    values = [c, d.neg(s), d.neg(c), s] if cosine else [s, c, d.neg(s), d.neg(c)]
    return _finish(f, x, _quadrant(d, q, values), keep_zero=not cosine)


def sin(builder, x, fast=False):
    return _sin_or_cos(builder, x, fast, cosine=False)


def cos(builder, x, fast=False):
    return _sin_or_cos(builder, x, fast, cosine=True)


def tan(builder, x, fast=False):
    _check(x)
    f = _E(builder, F32)
    if fast:
        return f.div(f._intrinsic("llvm.nvvm.sin.approx.f", x),
                     f._intrinsic("llvm.nvvm.cos.approx.f", x))
    d = _E(builder, F64)
    r, q = _reduce(builder, x)
    s, c = _sin_cos_poly(d, r)
    odd = builder.trunc(q, ir.IntType(1))
    t = d.sel(odd, d.neg(d.div(c, s)), d.div(s, c))
    return _finish(f, x, t, keep_zero=True)


TRIG = {"sin": sin, "cos": cos, "tan": tan}


def sincospi_double(builder, v):
    """(sin πv, cos πv) of a double ``v`` of moderate size (cuRAND's ``sincospi`` in
    ``curand_normal_double``, v ∈ (0, 2]): ``v = q/2 + f`` with ``q = rint(2v)`` and
    ``|f| ≤ 1/4`` (exact), ``r = π·f`` (π as a head and a tail), the polynomials of
    ``_sin_cos_poly`` chosen and signed by ``q mod 4``; within an ulp or two."""
    d = _E(builder, F64)
    q = d.floor(d.fma(v, 2.0, 0.5))
    f = d.fma(q, -0.5, v)
    pi_hi = float(_PI)
    pi_lo = float(_PI - Fraction(pi_hi))
    r = d.fma(f, pi_hi, d.mul(f, pi_lo))
    s, c = _sin_cos_poly(d, r)
    quadrant = builder.and_(builder.trunc(builder.fptosi(q, I64), I32), I32(3))
    return (_quadrant(d, quadrant, [s, c, d.neg(s), d.neg(c)]),
            _quadrant(d, quadrant, [c, d.neg(s), d.neg(c), s]))

"""The tile language's math functions as LLVM IR (``T.exp`` … ``T.erf``).

Each public function here takes an ``llvmlite.ir.IRBuilder`` and ``float`` or ``double``
values and returns the result as a value of the same type. The code is plain LLVM IR:
IEEE arithmetic, ``llvm.fma``, ``llvm.sqrt`` (PTX ``sqrt.rn``), ``llvm.floor``/``ceil``
(``cvt.rmi``/``cvt.rpi``), ``llvm.fabs``, bit manipulation and selects, so it runs
unchanged on any LLVM target (the tests run it on the host CPU to measure its error).
There are no calls: no libdevice, no libm. Branches are selects: every lane of a warp
runs the same instructions.

On a GPU target, float ``exp`` and ``exp2`` are the exceptions to "plain IR": they use
the special function unit's ``ex2.approx.f32`` (subnormals kept; 2 ulp over the whole
range, which is how CUDA's exp2f and expf compute them; measured against float64 by the
GPU tests), exp2 directly and exp on the Cody–Waite-reduced argument (``_exp_sfu``).
The softmax and attention kernels spend most of their arithmetic there.

Accuracy (default): within 2 ulp of the correctly rounded result over the whole range,
subnormals, ±0, ±inf and NaN included; special values follow C99 Annex F. The
algorithms are the classic ones:

- exp, exp2 and the exp inside pow, tanh, sigmoid, erf: Cody–Waite reduction
  ``x = k·ln2 + r``, ``|r| ≤ ln2/2`` (``ln2`` split in two constants, the first product
  exact through ``fma``), ``exp(r) = 1 + r + r²·Q(r)`` with Taylor coefficients 1/n!
  (degree 7 for float, 13 for double: truncation below 0.1 ulp), the reduced argument
  carried as a double-word (hi + lo) so that it adds no rounding error, and the scaling
  by ``2^k`` done with two exact power-of-two multiplications (overflow and gradual
  underflow then round once, at the right threshold).
- log, log2 and the log inside pow: ``x = 2^k·m``, ``m ∈ [√½, √2)`` by integer
  exponent arithmetic (subnormals scaled by ``2^24`` / ``2^54`` first), ``f = m − 1``
  (exact), ``log(m) = 2·atanh(s)``, ``s = f/(2+f)``, evaluated in double-word arithmetic
  (``2s + ⅔s³`` as hi + lo, the tail ``2s⁵/5 + 2s⁷/7 + …`` in working precision). That
  gives about 36 (float) / 64 (double) correct bits: enough for pow, whose error
  ``|y·log x|·ε`` must stay below an ulp.
- pow: ``exp(y·log|x|)`` with the product ``y·log|x|`` as a double word, then the C99
  special cases (``pow(x, ±0) = 1``, ``pow(1, y) = 1``, ``pow(-1, ±inf) = 1``, signed
  zeros and infinities for odd integer ``y``, NaN for a negative base and a
  non-integer exponent …) as selects.
- tanh: ``x + x³·P(x²)`` (a minimax polynomial, fitted for this module: degree 4 in
  ``x²`` for float, 10 for double, relative error below 2^-30 / 2^-60) for
  ``|x| < 0.55``, else ``1 − 2/(exp(2|x|) + 1)``.
- erf: fdlibm's ``s_erf.c`` (Sun Microsystems, 1993), the same piecewise rational
  approximations (coefficients rounded to float for float): ``x + x·P(x²)/Q(x²)`` below
  0.84375, ``erx + P(|x|−1)/Q(|x|−1)`` below 1.25, ``1 − exp(−x² − 0.5625 + R(1/x²)/S(1/x²))/x``
  below 6 (two fits, split at 1/0.35), 1 above.
- sigmoid: ``1/(1 + e)`` for ``x ≥ 0`` and ``e/(1 + e)`` below, ``e = exp(−|x|)``:
  no overflow, no cancellation, correct for large negative ``x``.
- sqrt: ``llvm.sqrt`` (correctly rounded). rsqrt: ``1/sqrt(x)`` (two correctly rounded
  steps, below 1 ulp). floor, ceil: the intrinsics (exact).

Fast math (``fast_math=True``, float only; double stays accurate): the hardware
approximations of the special function unit: ``ex2.approx.ftz.f32`` (exp via
``ex2(x·log2e)``), ``lg2.approx.ftz.f32`` (log via ``lg2(x)·ln2``), ``rsqrt.approx.f32``,
``sqrt.approx.f32``, ``tanh.approx.f32`` (sm_75+), ``rcp.approx.ftz.f32`` (sigmoid), pow
as ``ex2(y·lg2|x|)`` with the same special cases. These flush subnormals and have
errors of a few ulp (tanh: about 2^-11 relative).
"""
from __future__ import annotations

import math
import operator
import struct
from fractions import Fraction

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.codegen.typing.types import StorageFloat
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar import from_f32, to_f32
from tilejit.ir.kernel_config import current_kernel_or_none

# metadata on the routines' own arithmetic: never contracted into an fma
EXACT = "tilejit.exact"

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)

# ---------------------------------------------------------------------------------------
# Constants. ln 2 and log2 e to 100 digits; every working constant is derived from them
# (rounded, or split into a head and a tail) for the type at hand.
# ---------------------------------------------------------------------------------------
LN2 = Fraction("0.6931471805599453094172321214581765680755001343602552541206800094933936"
               "219696947156058633269964186875")
LOG2E = Fraction("1.442695040888963407359924681001892137426645954152985934135449406931109"
                 "219181185079885526622893506344")
TWO_THIRDS = Fraction(2, 3)


def _round(value, ty) -> float:
    """``value`` rounded to the nearest ``float`` (``ty`` F32) or ``double``."""
    d = float(value)
    if ty == F32:
        return struct.unpack("f", struct.pack("f", d))[0]
    return d


def _round_bits(value, bits: int) -> float:
    """``value`` rounded to ``bits`` significant bits (so that products by small
    integers stay exact)."""
    m, e = math.frexp(float(value))
    return math.ldexp(round(m * 2 ** bits), e - bits)


def _split(value, ty, bits: int | None = None) -> tuple[float, float]:
    """A head and a tail, ``head + tail ≈ value`` to twice the type's precision."""
    head = _round(value, ty) if bits is None else _round(_round_bits(value, bits), ty)
    return head, _round(Fraction(value) - Fraction(head), ty)


class _Fmt:
    """Facts about one floating type: float (binary32) or double (binary64)."""

    def __init__(self, ty):
        self.ty = ty
        self.double = ty == F64
        self.ity = I64 if self.double else I32
        self.width = 64 if self.double else 32
        self.mant = 52 if self.double else 23            # stored mantissa bits
        self.bias = 1023 if self.double else 127
        self.sign_bit = 1 << (self.width - 1)
        self.mant_mask = (1 << self.mant) - 1
        self.min_normal = 2.0 ** (1 - self.bias)
        # bit pattern of sqrt(1/2): log's mantissa interval [sqrt(1/2), sqrt(2))
        self.sqrt_half_bits = (0x3FE6A09E667F3BCD if self.double else 0x3F3504F3)
        self.one_bits = self.bias << self.mant
        # rint by the "magic number" 1.5·2^p: adding it pushes the fraction out
        self.magic = 1.5 * 2.0 ** self.mant
        # exp(x): beyond these the result is 0 or inf; the clamp keeps k (and the two
        # scale factors 2^(k/2)) in range: float k ∈ [-159, 130], double [-1082, 1024]
        self.exp_lo, self.exp_hi = (-750.0, 710.0) if self.double else (-110.0, 90.0)
        self.exp2_lo, self.exp2_hi = (-1080.0, 1030.0) if self.double else (-160.0, 130.0)
        # Taylor coefficients of Q(r) = (exp(r) - 1 - r)/r² = 1/2! + r/3! + …:
        # degree 13 (double) / 7 (float) in exp: the truncation |r|^(n+1)/(n+1)! at
        # |r| = ln2/2 is 4e-18 / 5e-9 relative, under 0.1 ulp
        n = 13 if self.double else 7
        self.exp_q = [_round(Fraction(1, math.factorial(j)), ty) for j in range(2, n + 1)]
        # log: 2·atanh(s) = 2s + (2/3)s³ + s⁵·(2/5 + (2/7)s² + …), |s| ≤ 0.1716;
        # the tail up to s^27 (double) / s^15 (float): truncation < 2^-68 / 2^-38
        n = 13 if self.double else 7
        self.log_tail = [_round(Fraction(2, 2 * j + 1), ty) for j in range(2, n + 1)]
        self.two_thirds = _split(TWO_THIRDS, ty)
        self.ln2 = _split(LN2, ty)            # full-precision head (Cody–Waite)
        # head with the low bits zero: k·head is exact for every exponent k
        self.ln2_k = _split(LN2, ty, bits=40 if self.double else 14)
        self.log2e = _split(LOG2E, ty)
        self.log_scale = 54 if self.double else 24   # subnormal inputs: x·2^scale
        # tanh(x) = x + x³·P(x²) for |x| < 0.55: minimax fit of
        # (tanh(x) - x)/x³ on x ∈ [0, 0.55] weighted by x² (i.e. the relative error
        # of tanh), Lawson's algorithm at 60 digits (mpmath): 2^-60.6 / 2^-29.9
        self.tanh_p = [_round(c, ty) for c in (_TANH_P64 if self.double else _TANH_P32)]
        self.tanh_small = 0.55
        self.erf = {k: [_round(c, ty) for c in v] for k, v in _ERF.items()}
        self.erf_big = 6.0      # erf(x) rounds to ±1 beyond (double; float from 3.92)


_TANH_P32 = [-0.3333331804524585, 0.13332601672055824, -0.05385385664234844,
             0.02107775339550686, -0.006282466729984555]
_TANH_P64 = [-0.333333333333333, 0.13333333333326833, -0.053968253963878554,
             0.021869488389101136, -0.00886323265275113, 0.00359209253216012,
             -0.001455545981653114, 0.000588457039257491, -0.0002334127040382685,
             8.33600351038174e-05, -1.9521007115325424e-05]

# The coefficients of fdlibm's s_erf.c, lowest degree first; each list is one polynomial
# of the piecewise approximation. Their source carries this notice:
#   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
#   Developed at SunPro, a Sun Microsystems, Inc. business.
#   Permission to use, copy, modify, and distribute this software is freely granted,
#   provided that this notice is preserved.
_ERF = {
    # |x| < 0.84375: erf(x) = x + x·pp(x²)/qq(x²)
    "pp": [1.28379167095512558561e-01, -3.25042107247001499370e-01,
           -2.84817495755985104766e-02, -5.77027029648944159157e-03,
           -2.37630166566501626084e-05],
    "qq": [1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
           5.08130628187576562776e-03, 1.32494738004321644526e-04,
           -3.96022827877536812320e-06],
    # 0.84375 ≤ |x| < 1.25: erf(x) = erx + pa(s)/qa(s), s = |x| − 1,
    # erx = erf(1) to 25 bits
    "erx": [8.45062911510467529297e-01],
    "pa": [-2.36211856075265944077e-03, 4.14856118683748331666e-01,
           -3.72207876035701323847e-01, 3.18346619901161753674e-01,
           -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03],
    "qa": [1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
           7.18286544141962662868e-02, 1.26171219808761642112e-01,
           1.36370839120290507362e-02, 1.19844998467991074170e-02],
    # 1.25 ≤ |x| < 1/0.35: erfc(x) = exp(−x² − 0.5625 + ra(s)/sa(s))/x, s = 1/x²
    "ra": [-9.86494403484714822705e-03, -6.93858572707181764372e-01,
           -1.05586262253232909814e+01, -6.23753324503260060396e+01,
           -1.62396669462573470355e+02, -1.84605092906711035994e+02,
           -8.12874355063065934246e+01, -9.81432934416914548592e+00],
    "sa": [1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
           4.34565877475229228821e+02, 6.45387271733267880336e+02,
           4.29008140027567833386e+02, 1.08635005541779435134e+02,
           6.57024977031928170135e+00, -6.04244152148580987438e-02],
    # 1/0.35 ≤ |x| < 6: the same form with rb/sb (padded with a zero to ra/sa's degree)
    "rb": [-9.86494292470009928597e-03, -7.99283237680523006574e-01,
           -1.77579549177547519889e+01, -1.60636384855821916062e+02,
           -6.37566443368389627722e+02, -1.02509513161107724954e+03,
           -4.83519191608651397019e+02, 0.0],
    "sb": [1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
           1.53672958608443695994e+03, 3.19985821950859553908e+03,
           2.55305040643316442583e+03, 4.74528541206955367215e+02,
           -2.24409524465858183362e+01, 0.0],
}

_FMTS = {}


def _fmt(ty) -> _Fmt:
    fmt = _FMTS.get(str(ty))
    if fmt is None:
        fmt = _FMTS[str(ty)] = _Fmt(ty)
    return fmt


class _E:
    """An emitter: IRBuilder arithmetic on one float type, with Python numbers turned
    into constants of that type."""

    def __init__(self, builder: ir.IRBuilder, ty):
        if ty not in (F32, F64):
            raise TypeError(f"tilejit math: float or double expected, got {ty}")
        self.b = builder
        self.ty = ty
        self.f = _fmt(ty)

    # -- values ---------------------------------------------------------------------
    def c(self, v):
        return v if isinstance(v, ir.Value) else ir.Constant(self.ty, float(v))

    def ic(self, v):
        return v if isinstance(v, ir.Value) else ir.Constant(self.f.ity, int(v))

    def _intrinsic(self, name, *args, ret=None):
        ret = ret or self.ty
        fnty = ir.FunctionType(ret, [a.type for a in args])
        module = self.b.module
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, fnty, name)
        return self.b.call(fn, list(args))

    def _sfx(self):
        return "f64" if self.f.double else "f32"

    # -- arithmetic (IEEE, round to nearest even; no fast-math flags) ---------------
    # Marked exact: the routines' error analysis assumes each operation rounds once by
    # itself, so the GPU target's multiply-add contraction (nvptx.contract_multiply_add)
    # leaves them alone; products that should be fused use ``fma`` explicitly.
    def _exact(self, instr):
        instr.set_metadata(EXACT, self.b.module.add_metadata([]))
        return instr

    def add(self, a, b):
        return self._exact(self.b.fadd(self.c(a), self.c(b)))

    def sub(self, a, b):
        return self._exact(self.b.fsub(self.c(a), self.c(b)))

    def mul(self, a, b):
        return self._exact(self.b.fmul(self.c(a), self.c(b)))

    def div(self, a, b):
        return self.b.fdiv(self.c(a), self.c(b))

    def neg(self, a):
        return self.b.fneg(self.c(a))

    def fma(self, a, b, c):
        a, b, c = self.c(a), self.c(b), self.c(c)
        return self._intrinsic(f"llvm.fma.{self._sfx()}", a, b, c)

    def fabs(self, a):
        return self._intrinsic(f"llvm.fabs.{self._sfx()}", self.c(a))

    def sqrt(self, a):
        return self._intrinsic(f"llvm.sqrt.{self._sfx()}", self.c(a))

    def floor(self, a):
        return self._intrinsic(f"llvm.floor.{self._sfx()}", self.c(a))

    def ceil(self, a):
        return self._intrinsic(f"llvm.ceil.{self._sfx()}", self.c(a))

    def clamp(self, a, lo, hi):
        """``min(max(a, lo), hi)``; NaN becomes ``lo`` (callers select NaN back)."""
        sfx = self._sfx()
        a = self._intrinsic(f"llvm.maxnum.{sfx}", self.c(a), self.c(lo))
        return self._intrinsic(f"llvm.minnum.{sfx}", a, self.c(hi))

    def poly(self, x, coeffs):
        """``c0 + c1·x + c2·x² + …`` by Horner's rule with fused multiply-adds."""
        acc = self.c(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, c)
        return acc

    # -- comparisons and selects -----------------------------------------------------
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", self.c(a), self.c(b))

    def le(self, a, b):
        return self.b.fcmp_ordered("<=", self.c(a), self.c(b))

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", self.c(a), self.c(b))

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", self.c(a), self.c(b))

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", self.c(a), self.c(b))

    def ne(self, a, b):
        return self.b.fcmp_ordered("!=", self.c(a), self.c(b))

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, self.c(a), self.c(b))

    # -- bits ------------------------------------------------------------------------
    def bits(self, a):
        return self.b.bitcast(a, self.f.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def signbit(self, a):
        return self.b.icmp_signed("<", self.bits(a), self.ic(0))

    def copysign(self, mag, sign):
        """``|mag|`` with the sign of ``sign`` (``mag`` must be non-negative)."""
        s = self.b.and_(self.bits(sign), self.ic(self.f.sign_bit))
        return self.from_bits(self.b.or_(self.bits(mag), s))

    def negate_if(self, cond, a):
        return self.sel(cond, self.neg(a), a)

    def nan(self):
        return self.c(math.nan)

    # -- double-word helpers ---------------------------------------------------------
    def fast_two_sum(self, a, b):
        """``a + b`` as (sum, error), exact when ``|a| ≥ |b|`` (Dekker)."""
        s = self.add(a, b)
        return s, self.add(self.sub(a, s), b)

    def two_sum(self, a, b):
        """``a + b`` as (sum, error), exact for any order (Knuth)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def two_prod(self, a, b):
        """``a·b`` as (product, exact error) via fma."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))


# =======================================================================================
# exp family
# =======================================================================================
def _scale(e: _E, p, k):
    """``p·2^k`` for an integer ``k`` (i32/i64) in the clamped range: two exact
    multiplications by ``2^(k/2)`` (each a normal number), so that only the last one
    rounds, into the subnormal range or to infinity as the exact result would."""
    f = e.f
    k = e.b.sext(k, f.ity) if f.double else k
    k1 = e.b.ashr(k, e.ic(1))
    k2 = e.b.sub(k, k1)
    s1 = e.from_bits(e.b.shl(e.b.add(k1, e.ic(f.bias)), e.ic(f.mant)))
    s2 = e.from_bits(e.b.shl(e.b.add(k2, e.ic(f.bias)), e.ic(f.mant)))
    return e.mul(e.mul(p, s1), s2)


def _exp_kernel(e: _E, r, rlo):
    """``exp(r + rlo)`` for ``|r| ≤ ln2/2`` and a tiny correction ``rlo``, in
    [0.7, 1.42], as a double word (hi, lo) whose sum is within a few hundredths of an
    ulp: ``1 + r + (r²·Q(r) + rlo·(1 + r))``, the leading ``1 + r`` summed exactly."""
    q = e.poly(r, e.f.exp_q)
    h = e.fma(e.mul(r, r), q, e.fma(rlo, r, rlo))
    s1, e1 = e.fast_two_sum(e.c(1.0), r)
    return e.fast_two_sum(s1, e.add(e1, h))


def _exp_dd(e: _E, hi, lo, double_word=False):
    """``exp(hi + lo)`` for a double word ``hi + lo`` (``|lo| ≤ ulp(hi)``); NaN for a
    NaN ``hi``. With ``double_word``, the result as (hi, lo) (for the callers that
    divide by it: sigmoid, tanh)."""
    f = e.f
    x = e.clamp(hi, f.exp_lo, f.exp_hi)
    lo = e.sel(e.eq(hi, x), lo, 0.0)        # clamped (or NaN, inf): the tail is moot
    # k = rint(x·log2 e): the magic constant rounds the fused product to an integer
    kf = e.sub(e.fma(x, f.log2e[0], f.magic), f.magic)
    # r = x − k·ln2: the first step is exact (the difference fits the format), the
    # second adds the tail of ln2 and the input's tail
    r_hi = e.fma(e.neg(kf), f.ln2[0], x)
    corr = e.fma(e.neg(kf), f.ln2[1], lo)
    r, rlo = e.fast_two_sum(r_hi, corr)
    p_hi, p_lo = _exp_kernel(e, r, rlo)
    k = e.b.fptosi(kf, I32)
    result = e.sel(e.isnan(hi), hi, _scale(e, p_hi, k))
    if double_word:
        return result, _scale(e, p_lo, k)
    return result


def exp(builder, x, fast=False, sfu=False):
    """e^x. ``sfu`` (float on NVPTX): the special function unit's 2^x on the reduced
    argument, see ``_exp_sfu``."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        return _ex2_approx(e, e.mul(x, e.f.log2e[0]))
    if sfu and x.type == F32:
        return _exp_sfu(e, x)
    return _exp_dd(e, x, e.c(0.0))


def _exp_sfu(e: _E, x):
    """e^x in float as CUDA's expf computes it: ``k = rint(x·log2 e)``, the
    Cody–Waite ``f = x − k·ln2`` (|f| ≤ ln2/2, exact head), ``2^(f·log2 e)`` by
    ``ex2.approx.f32`` (|argument| ≤ 0.5: the rounding of the product adds under 0.1
    ulp) and the exact scaling by ``2^k`` (two power-of-two multiplications, so gradual
    underflow and overflow round once)."""
    f = e.f
    xc = e.clamp(x, f.exp_lo, f.exp_hi)
    kf = e.sub(e.fma(xc, f.log2e[0], f.magic), f.magic)
    r = e.fma(e.neg(kf), f.ln2_k[0], xc)          # exact: ln2's head has 14 bits
    r = e.fma(e.neg(kf), f.ln2_k[1], r)
    p = e._intrinsic("llvm.nvvm.ex2.approx.f", e.mul(r, f.log2e[0]))
    result = _scale(e, p, e.b.fptosi(kf, I32))
    return e.sel(e.isnan(x), x, result)


def exp2(builder, x, fast=False, sfu=False):
    """2^x: ``k = rint(x)``, ``r = x − k`` (exact), ``2^r = exp(r·ln2)`` with the
    product as a double word. ``sfu`` (float on NVPTX): ``ex2.approx.f32``, the special
    function unit's 2^x with subnormal results (2 ulp over the whole range, as CUDA's
    exp2f)."""
    e = _E(builder, x.type)
    f = e.f
    if fast and x.type == F32:
        return _ex2_approx(e, x)
    if sfu and x.type == F32:
        return e._intrinsic("llvm.nvvm.ex2.approx.f", x)
    xc = e.clamp(x, f.exp2_lo, f.exp2_hi)
    kf = e.sub(e.add(xc, f.magic), f.magic)
    r = e.sub(xc, kf)
    rl, rl_err = e.two_prod(r, f.ln2[0])
    rl_err = e.fma(r, f.ln2[1], rl_err)
    p, _ = _exp_kernel(e, rl, rl_err)
    result = _scale(e, p, e.b.fptosi(kf, I32))
    return e.sel(e.isnan(x), x, result)


def _ex2_approx(e: _E, x):
    return e._intrinsic("llvm.nvvm.ex2.approx.ftz.f", x)


def _lg2_approx(e: _E, x):
    return e._intrinsic("llvm.nvvm.lg2.approx.ftz.f", x)


# =======================================================================================
# log family
# =======================================================================================
def _log_parts(e: _E, x):
    """For a positive finite ``x`` (other inputs give values the callers replace):
    ``(k, hi, lo)`` with ``x = 2^k·m``, ``m ∈ [√½, √2)`` and ``hi + lo = log(m)`` to
    about 2^-36 (float) / 2^-66 (double) relative."""
    f = e.f
    b = e.b
    tiny = e.lt(x, f.min_normal)
    x = e.sel(tiny, e.mul(x, 2.0 ** f.log_scale), x)       # subnormal: exact scaling
    ix = e.bits(x)
    # add 1 − √½ in the exponent-mantissa encoding: the exponent field steps up
    # exactly when m ≥ √2, then put the mantissa back over √½
    ix = b.add(ix, e.ic(f.one_bits - f.sqrt_half_bits))
    k = b.sub(b.lshr(ix, e.ic(f.mant)), e.ic(f.bias))
    k = b.sub(k, b.select(tiny, e.ic(f.log_scale), e.ic(0)))
    m = e.from_bits(b.add(b.and_(ix, e.ic(f.mant_mask)), e.ic(f.sqrt_half_bits)))
    fr = e.sub(m, 1.0)                                      # exact (Sterbenz)
    # s = f/(2 + f) as a double word
    d_hi, d_lo = e.fast_two_sum(e.c(2.0), fr)
    inv = e.div(1.0, d_hi)
    s_hi = e.mul(fr, inv)
    rem = e.fma(e.neg(s_hi), d_hi, fr)                      # f − s·(2+f)
    rem = e.fma(e.neg(s_hi), d_lo, rem)
    s_lo = e.mul(rem, inv)
    # s² and s³ as double words
    z_hi, z_lo = e.two_prod(s_hi, s_hi)
    z_lo = e.fma(e.mul(s_hi, 2.0), s_lo, z_lo)
    c_hi, c_lo = e.two_prod(z_hi, s_hi)
    c_lo = e.fma(z_hi, s_lo, e.fma(z_lo, s_hi, c_lo))
    # (2/3)·s³ as a double word
    t_hi, t_lo = f.two_thirds
    u_hi, u_lo = e.two_prod(c_hi, t_hi)
    u_lo = e.fma(c_hi, t_lo, e.fma(c_lo, t_hi, u_lo))
    # the tail s⁵·(2/5 + (2/7)s² + …) in working precision
    tail = e.mul(e.mul(c_hi, z_hi), e.poly(z_hi, f.log_tail))
    # 2s + (2/3)s³ + tail
    acc, acc_err = e.fast_two_sum(e.mul(s_hi, 2.0), u_hi)
    acc_err = e.add(acc_err, e.add(e.fma(s_lo, 2.0, u_lo), tail))
    hi, lo = e.fast_two_sum(acc, acc_err)
    return b.sitofp(k, e.ty), hi, lo


def _log_dd(e: _E, x):
    """``log(x)`` as a double word for a positive finite ``x``: ``k·ln2 + log(m)``
    (``k·ln2`` from a head with trailing zeros, so ``k·head`` is exact)."""
    kf, hi, lo = _log_parts(e, x)
    head, tail = e.f.ln2_k
    s, err = e.fast_two_sum(e.mul(kf, head), hi)          # |k·ln2| ≥ |log m| if k ≠ 0
    err = e.add(err, e.fma(kf, tail, lo))
    return e.fast_two_sum(s, err)


def _log_specials(e: _E, x, result):
    """C99: log(±0) = −inf, log(x < 0) = NaN, log(+inf) = +inf, log(NaN) = NaN."""
    result = e.sel(e.eq(x, math.inf), x, result)
    result = e.sel(e.eq(x, 0.0), -math.inf, result)
    result = e.sel(e.lt(x, 0.0), e.nan(), result)
    return e.sel(e.isnan(x), x, result)


def log(builder, x, fast=False):
    """Natural logarithm."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        return e.mul(_lg2_approx(e, x), e.f.ln2[0])
    hi, _ = _log_dd(e, x)
    return _log_specials(e, x, hi)


def log2(builder, x, fast=False):
    """Base-2 logarithm: ``k + log(m)·log2 e`` (the product as a double word; exact
    for powers of two)."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        return _lg2_approx(e, x)
    kf, hi, lo = _log_parts(e, x)
    l2e_hi, l2e_lo = e.f.log2e
    p, p_err = e.two_prod(hi, l2e_hi)
    p_err = e.fma(hi, l2e_lo, e.fma(lo, l2e_hi, p_err))
    s, err = e.fast_two_sum(kf, p)                         # |k| ≥ 1 > |p| if k ≠ 0
    return _log_specials(e, x, e.add(s, e.add(err, p_err)))


# =======================================================================================
# pow
# =======================================================================================
def pow(builder, x, y, fast=False):  # noqa: A001 - the language's name
    """x^y with C99 Annex F special cases."""
    e = _E(builder, x.type)
    ax = e.fabs(x)
    if fast and x.type == F32:
        core = _ex2_approx(e, e.mul(y, _lg2_approx(e, ax)))
    else:
        # exp(y·log|x|) with y·log|x| as a double word
        l_hi, l_lo = _log_dd(e, ax)
        p_hi, p_lo = e.two_prod(y, l_hi)
        p_lo = e.fma(y, l_lo, p_lo)
        core = _exp_dd(e, p_hi, p_lo)
    y_int = e.eq(e.floor(y), y)                            # also true for ±inf
    half = e.mul(y, 0.5)
    y_odd = e.b.and_(y_int, e.ne(e.floor(half), half))   # odd integer (finite)
    x_neg = e.signbit(x)
    odd_neg = e.b.and_(x_neg, y_odd)                       # result takes x's sign
    r = e.negate_if(odd_neg, core)
    # negative finite base, non-integer exponent: NaN
    neg_finite = e.b.and_(e.lt(x, 0.0), e.ne(ax, math.inf))
    r = e.sel(e.b.and_(neg_finite, e.b.not_(y_int)), e.nan(), r)
    y_neg = e.lt(y, 0.0)
    # pow(±0, y): ±inf for y < 0, ±0 for y > 0 (signed for odd integer y)
    zero = e.negate_if(odd_neg, e.sel(y_neg, math.inf, 0.0))
    r = e.sel(e.eq(ax, 0.0), zero, r)
    # pow(±inf, y): ±0 for y < 0, ±inf for y > 0
    inf = e.negate_if(odd_neg, e.sel(y_neg, 0.0, math.inf))
    r = e.sel(e.eq(ax, math.inf), inf, r)
    # pow(x, ±inf): 1 for |x| = 1, else 0 or inf by |x| < 1 versus the sign of y
    big = e.b.icmp_unsigned("==", e.lt(ax, 1.0), y_neg)
    yinf = e.sel(e.eq(ax, 1.0), 1.0, e.sel(big, math.inf, 0.0))
    r = e.sel(e.eq(e.fabs(y), math.inf), yinf, r)
    r = e.sel(e.b.or_(e.isnan(x), e.isnan(y)), e.nan(), r)
    # pow(x, ±0) = 1 and pow(1, y) = 1, NaN included
    return e.sel(e.b.or_(e.eq(y, 0.0), e.eq(x, 1.0)), 1.0, r)


# =======================================================================================
# sqrt, rsqrt, floor, ceil
# =======================================================================================
def sqrt(builder, x, fast=False):
    """Square root (``sqrt.rn``, correctly rounded; ``sqrt.approx`` in fast math)."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        return e._intrinsic("llvm.nvvm.sqrt.approx.f", x)
    return e.sqrt(x)


def rsqrt(builder, x, fast=False):
    """1/sqrt(x): a correctly rounded square root and a correctly rounded division
    (under 1 ulp); ``rsqrt.approx.f32`` in fast math. rsqrt(±0) = ±inf."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        return e._intrinsic("llvm.nvvm.rsqrt.approx.f", x)
    y = e.div(1.0, e.sqrt(x))
    # one Newton step y + y·(1 − x·y²)/2, the residual from x·y as a double word
    # (x·y ≈ √x stays in range for subnormal and huge x)
    t, t_err = e.two_prod(x, y)
    r = e.fma(e.neg(t_err), y, e.fma(e.neg(t), y, 1.0))
    refined = e.fma(e.mul(y, 0.5), r, y)
    # x = 0, inf, NaN or negative: the residual is NaN; keep y (±inf, 0, NaN)
    return e.sel(e.isnan(r), y, refined)


def floor(builder, x, fast=False):
    """Largest integer not greater than x (exact)."""
    return _E(builder, x.type).floor(x)


def ceil(builder, x, fast=False):
    """Smallest integer not less than x (exact)."""
    return _E(builder, x.type).ceil(x)


# =======================================================================================
# tanh, sigmoid, erf
# =======================================================================================
def tanh(builder, x, fast=False):
    """Hyperbolic tangent: an odd polynomial near 0, ``1 − 2/(e^{2|x|} + 1)`` beyond
    (which saturates to ±1, and is NaN for NaN); ``tanh.approx.f32`` in fast math."""
    e = _E(builder, x.type)
    f = e.f
    if fast and x.type == F32:
        return e._intrinsic("llvm.nvvm.tanh.approx.f32", x)
    # on |x|, the sign applied last (x + x³·P(x²) would turn −0 into +0)
    a = e.fabs(x)
    z = e.mul(a, a)
    small = e.fma(e.mul(a, z), e.poly(z, f.tanh_p), a)
    ex, ex_lo = _exp_dd(e, e.mul(a, 2.0), e.c(0.0), double_word=True)
    q = _div_dd(e, e.c(2.0), e.c(0.0), ex, ex_lo)          # 2/(e^{2|x|} + 1)
    big = e.sub(1.0, q)
    return e.copysign(e.sel(e.lt(a, f.tanh_small), small, big), x)


def _div_dd(e: _E, n_hi, n_lo, ex, ex_lo):
    """``(n_hi + n_lo)/(1 + ex + ex_lo)`` for ``ex ≥ 0``, within about half an ulp: the
    denominator as a double word, the quotient ``q = n·(1/s)`` corrected by its
    remainder. ``ex = inf`` gives 0."""
    s, err = e.two_sum(ex, e.c(1.0))
    err = e.add(err, ex_lo)
    inv = e.div(1.0, s)
    q = e.mul(n_hi, inv)
    rem = e.fma(e.neg(q), s, n_hi)
    rem = e.add(rem, e.fma(e.neg(q), err, n_lo))
    out = e.fma(rem, inv, q)
    return e.sel(e.isnan(out), q, out)


def sigmoid(builder, x, fast=False):
    """1/(1 + e^-x), computed as ``1/(1 + e)`` (x ≥ 0) or ``e/(1 + e)`` (x < 0) with
    ``e = exp(−|x|) ≤ 1``; fast math: ``rcp.approx(1 + ex2.approx(−x·log2 e))``."""
    e = _E(builder, x.type)
    if fast and x.type == F32:
        t = _ex2_approx(e, e.mul(x, -e.f.log2e[0]))
        return e._intrinsic("llvm.nvvm.rcp.approx.ftz.f", e.add(t, 1.0))
    ex, ex_lo = _exp_dd(e, e.neg(e.fabs(x)), e.c(0.0), double_word=True)
    pos = e.ge(x, 0.0)
    return _div_dd(e, e.sel(pos, 1.0, ex), e.sel(pos, 0.0, ex_lo), ex, ex_lo)


def erf(builder, x, fast=False):
    """Error function, fdlibm's piecewise approximation (see the module docstring);
    the same code in fast math."""
    e = _E(builder, x.type)
    f = e.f
    C = f.erf
    a = e.fabs(x)
    # |x| < 0.84375: x + x·P/Q (x·(1 + P/Q) with one rounding, also for subnormals)
    z = e.mul(a, a)
    v1 = e.fma(a, e.div(e.poly(z, C["pp"]), e.poly(z, C["qq"])), a)
    # 0.84375 ≤ |x| < 1.25: erf(1) + P(s)/Q(s), s = |x| − 1
    s = e.sub(a, 1.0)
    v2 = e.add(C["erx"][0], e.div(e.poly(s, C["pa"]), e.poly(s, C["qa"])))
    # 1.25 ≤ |x| < 6: 1 − exp(−x² − 0.5625 + R/S)/|x|, R/S in 1/x² from one of two fits;
    # −x² as a double word so that the exponential's argument is exact to an ulp
    t = e.div(1.0, z)
    near = e.lt(a, 1.0 / 0.35)
    rc = [e.sel(near, ra, rb) for ra, rb in zip(C["ra"], C["rb"])]
    sc = [e.sel(near, sa, sb) for sa, sb in zip(C["sa"], C["sb"])]
    z_hi, z_lo = e.two_prod(a, a)
    arg_tail = e.sub(e.sub(e.div(e.poly(t, rc), e.poly(t, sc)), 0.5625), z_lo)
    arg_hi, arg_lo = e.two_sum(e.neg(z_hi), arg_tail)
    v3 = e.sub(1.0, e.div(_exp_dd(e, arg_hi, arg_lo), a))
    v = e.sel(e.lt(a, f.erf_big), v3, 1.0)
    v = e.sel(e.lt(a, 1.25), v2, v)
    v = e.sel(e.lt(a, 0.84375), v1, v)
    return e.sel(e.isnan(x), x, e.copysign(v, x))


UNARY = {"exp": exp, "exp2": exp2, "log": log, "log2": log2, "sqrt": sqrt,
         "rsqrt": rsqrt, "tanh": tanh, "sigmoid": sigmoid, "floor": floor,
         "ceil": ceil, "erf": erf}
BINARY = {"pow": pow}


# =======================================================================================
# Lowering rules (the "common" table). The typing gives (T, …) -> T with T float16,
# bfloat16, float32 or float64; the half types are widened to float32, computed there
# and rounded back to nearest even. ``fast_math=True`` on the kernel selects the
# approximations (float32 and the half types).
# =======================================================================================
def _fast_math() -> bool:
    config = current_kernel_or_none()
    return bool(config is not None and config.fast_math)


def _in_float32(builder, ty, compute, args):
    if isinstance(ty, StorageFloat):
        return from_f32(builder, ty, compute(*(to_f32(builder, ty, a) for a in args)))
    if ty == types.float16:
        return builder.fptrunc(compute(*(builder.fpext(a, F32) for a in args)), ir.HalfType())
    return compute(*args)


# float exp and exp2 on a GPU target: the special function unit (2 ulp, as CUDA's
# expf/exp2f); the host (the accuracy tests) and double keep the software routines
SFU = {"exp", "exp2"}


def _sfu() -> bool:
    config = current_kernel_or_none()
    return config is not None and config.target.has_special_function_unit


def _unary_rule(build):
    def impl(context, builder, sig, args):
        kw = {"fast": _fast_math()}
        if build.__name__ in SFU:
            kw["sfu"] = _sfu()
        return _in_float32(builder, sig.return_type, lambda x: build(builder, x, **kw),
                           args)
    impl.__name__ = f"{build.__name__}_impl"
    return impl


def _pow_rule(context, builder, sig, args):
    fast = _fast_math()
    return _in_float32(builder, sig.return_type,
                       lambda x, y: pow(builder, x, y, fast=fast), args)


def _register():
    for name, build in UNARY.items():
        lower(getattr(T, name), types.Any)(_unary_rule(build))
    lower(T.pow, types.Any, types.Any)(_pow_rule)
    # Python's `x ** y` on floats (a scale such as `dim ** -0.5`) is T.pow
    for op in (operator.pow, operator.ipow):
        for ty in (types.float32, types.float64):
            lower(op, ty, ty)(_pow_rule)
    # Numba's float `//` and `%` (Python's, as TileLang's floordiv and floormod of floats)
    # round their quotient with math.floor: the intrinsic
    for ty in (types.float32, types.float64):
        lower(math.floor, ty)(_unary_rule(floor))
    # Python's abs() of a float is Numba's math.fabs: the intrinsic, exact in any width
    for ty in (types.float16, types.float32, types.float64):
        lower(math.fabs, ty)(_fabs_rule)


def _fabs_rule(context, builder, sig, args):
    fabs = builder.module.declare_intrinsic("llvm.fabs", [args[0].type])
    return builder.call(fabs, [args[0]])


_register()

"""The rest of ``language/scalar_math.py`` as LLVM IR, and the lowering rules of all of
it (sin, cos, tan from ``trig.py``).

- exp10: ``exp(x·ln10)`` with the product as a double word (``math._exp_dd``): within
  an ulp, as exp. log10: ``log(x)`` as a double word times ``1/ln10`` as one.
  log1p: ``u = 1 + x`` (rounded) and ``log(u) + c/u``, ``c = x − (u − 1)`` the exact
  rounding error of u, with log(u) as a double word: within an ulp.
- trunc, nearbyint and round: ``llvm.trunc`` (``cvt.rzi``), ``llvm.rint`` (``cvt.rni``,
  ties to even) and ``llvm.round`` (ties away from zero); exact.
- isnan, isinf, isfinite: comparisons; copysign: ``llvm.copysign``.
- popcount, clz: ``llvm.ctpop`` / ``llvm.ctlz`` (``popc`` / ``clz``) at the operand's
  width, as an int32.
"""
from __future__ import annotations

import decimal
from fractions import Fraction

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.codegen.lowering.math import (F32, F64, _E, _exp_dd, _fast_math, _in_float32,
                                           _log_dd, _log_specials, _split, _sfu, exp, log)
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.trig import TRIG


def _ln10() -> Fraction:
    with decimal.localcontext() as ctx:
        ctx.prec = 110
        return Fraction(str(decimal.Decimal(10).ln()))


LN10 = _ln10()


def exp10(builder, x, fast=False):
    e = _E(builder, x.type)
    hi, lo = _split(LN10, x.type)
    if fast and x.type == F32:
        return exp(builder, e.mul(x, hi), fast=True)
    p, p_err = e.two_prod(x, hi)
    p_err = e.fma(x, lo, p_err)
    result = _exp_dd(e, p, p_err)
    return e.sel(e.isnan(x), x, result)


def log10(builder, x, fast=False):
    e = _E(builder, x.type)
    c_hi, c_lo = _split(1 / LN10, x.type)
    if fast and x.type == F32:
        return e.mul(log(builder, x, fast=True), c_hi)
    hi, lo = _log_dd(e, x)
    p, p_err = e.two_prod(hi, c_hi)
    p_err = e.fma(hi, c_lo, e.fma(lo, c_hi, p_err))
    return _log_specials(e, x, e.add(p, p_err))


def log1p(builder, x, fast=False):
    e = _E(builder, x.type)
    u = e.add(x, 1.0)
    if fast and x.type == F32:
        return _log_specials(e, u, log(builder, u, fast=True))
    # log(1 + x) = log(u) + c/u to first order, c = x − (u − 1) the rounding error of u
    # (exact); for |x| below half an ulp of 1, u = 1 and the result is x itself
    c = e.sub(x, e.sub(u, 1.0))
    hi, lo = _log_dd(e, u)
    result = e.add(hi, e.add(lo, e.div(c, u)))
    return _log_specials(e, u, result)


def _intrinsic_rule(name):
    def build(builder, x, fast=False):
        e = _E(builder, x.type)
        return e._intrinsic(f"llvm.{name}.{e._sfx()}", x)
    return build


FLOAT_UNARY = {**TRIG, "exp10": exp10, "log10": log10, "log1p": log1p,
               "trunc": _intrinsic_rule("trunc"), "nearbyint": _intrinsic_rule("rint")}
ROUND = {"ties-to-even": _intrinsic_rule("rint"),
         "ties-away-from-zero": _intrinsic_rule("round")}


def _unary_rule(build):
    def impl(context, builder, sig, args):
        fast = _fast_math() and _sfu()
        return _in_float32(builder, sig.return_type, lambda x: build(builder, x, fast=fast),
                           args)
    impl.__name__ = f"{build.__name__}_impl"
    return impl


def _round_rule(context, builder, sig, args):
    mode = sig.args[1].literal_value if len(sig.args) > 1 else "ties-to-even"
    return _in_float32(builder, sig.return_type, lambda x: ROUND[mode](builder, x),
                       args[:1])


def _copysign_rule(context, builder, sig, args):
    def build(x, y):
        e = _E(builder, x.type)
        return e._intrinsic(f"llvm.copysign.{e._sfx()}", x, y)
    return _in_float32(builder, sig.return_type, build, args)


def _as_float(context, builder, ty, value):
    """A float or double operand for classification (integers: their float value)."""
    if value.type in (F32, F64):
        return value
    if isinstance(ty, (types.Integer, types.Boolean)):
        return context.cast(builder, value, ty, types.float64)
    return context.cast(builder, value, ty, types.float32)     # the half types


def _classify_rule(kind):
    def impl(context, builder, sig, args):
        x = _as_float(context, builder, sig.args[0], args[0])
        e = _E(builder, x.type)
        if kind == "isnan":
            return e.isnan(x)
        finite = e.lt(e.fabs(x), float("inf"))         # false for inf and NaN
        if kind == "isfinite":
            return finite
        return builder.and_(builder.not_(finite), builder.not_(e.isnan(x)))
    return impl


def _bit_count_rule(name):
    def impl(context, builder, sig, args):
        (x,) = args
        ty = x.type
        fn = builder.module.globals.get(f"llvm.{name}.i{ty.width}") or ir.Function(
            builder.module, ir.FunctionType(ty, [ty] + ([ir.IntType(1)] if name == "ctlz"
                                                        else [])), f"llvm.{name}.i{ty.width}")
        extra = [ir.Constant(ir.IntType(1), 0)] if name == "ctlz" else []
        count = builder.call(fn, [x] + extra)
        if ty.width > 32:
            return builder.trunc(count, ir.IntType(32))
        return builder.zext(count, ir.IntType(32)) if ty.width < 32 else count
    return impl


def _register():
    for name, build in FLOAT_UNARY.items():
        lower(getattr(T, name), types.Any)(_unary_rule(build))
    lower(T.round, types.Any)(_round_rule)
    lower(T.round, types.Any, types.StringLiteral)(_round_rule)
    lower(T.copysign, types.Any, types.Any)(_copysign_rule)
    for kind in ("isnan", "isinf", "isfinite"):
        lower(getattr(T, kind), types.Any)(_classify_rule(kind))
    lower(T.popcount, types.Any)(_bit_count_rule("ctpop"))
    lower(T.clz, types.Any)(_bit_count_rule("ctlz"))


_register()

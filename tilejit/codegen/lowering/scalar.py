"""Scalar rules: the weak float, the bfloat16 and float8 conversions, casts, select,
min/max, abs, ceildiv, typed constants."""
from __future__ import annotations

import math
import operator

from llvmlite import ir
from numba.core import types
from numba.core.imputils import impl_ret_untracked

from tilejit import language as T
from tilejit.language import tir_exprs
from tilejit.codegen.typing.templates import named_dtype
from tilejit.codegen.typing.types import BFloat16, DTypeType, StorageFloat, WeakFloat
from tilejit.codegen.lowering.registry import (lower, lower_cast, lower_constant,
                                               lower_getattr)
from tilejit.ir.kernel_config import current_kernel_or_none
from tilejit.language.numerics import finite_range

I8, I16, I32, F32 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.FloatType()


@lower_constant(WeakFloat)
def weak_float_constant(context, builder, ty, pyval):
    return ir.Constant(ir.DoubleType(), float(pyval))


@lower_constant(DTypeType)
def dtype_constant(context, builder, ty, pyval):
    return context.get_dummy_value()


@lower_cast(WeakFloat, types.Float)
@lower_cast(types.Float, WeakFloat)
def weak_float_cast(context, builder, fromty, toty, val):
    lty = context.get_value_type(toty)
    if lty == val.type:
        return val
    return builder.fptrunc(val, lty) if fromty.bitwidth > toty.bitwidth else builder.fpext(val, lty)


def bf16_to_f32(builder, bits):
    """bfloat16 is the upper half of a binary32: widen by a 16-bit shift."""
    return builder.bitcast(builder.shl(builder.zext(bits, I32), I32(16)), F32)


def f32_to_bf16(builder, value):
    """Round a binary32 to bfloat16, ties to even: add 0x7FFF plus the lowest kept bit,
    keep the upper 16 bits; NaN becomes the canonical quiet NaN 0x7FC0."""
    bits = builder.bitcast(value, I32)
    lsb = builder.and_(builder.lshr(bits, I32(16)), I32(1))
    rounded = builder.lshr(builder.add(bits, builder.add(I32(0x7FFF), lsb)), I32(16))
    is_nan = builder.fcmp_unordered("uno", value, value)
    return builder.select(is_nan, I16(0x7FC0), builder.trunc(rounded, I16))


# float8 (OCP FP8, as PTX's e4m3 / e5m2): (exponent bits, mantissa bits, bias, largest
# finite value). Conversions are integer and float32 arithmetic, so they build for every
# target (sm_80 has no float8 conversion instruction; AMDGPU's differ).
_FLOAT8 = {"float8_e4m3": (4, 3, 7, 448.0), "float8_e5m2": (5, 2, 15, 57344.0)}
_NAN8 = 0x7F


def _e8m0_to_f32(builder, bits):
    """float8_e8m0fnu: 2^(code - 127) is float32's exponent field, but code 0 (2^-127, a
    float32 subnormal: 0x00400000) and 0xFF (NaN)."""
    u = builder.zext(bits, I32)
    value = builder.shl(u, I32(23))
    value = builder.select(builder.icmp_unsigned("==", u, I32(0)), I32(0x00400000), value)
    value = builder.select(builder.icmp_unsigned("==", u, I32(0xFF)), I32(0x7FC00000), value)
    return builder.bitcast(value, F32)


def _f32_to_e8m0(builder, value):
    """float32 → float8_e8m0fnu as torch converts (``language/numerics._round_to_e8m0``):
    the magnitude's exponent, one up past a half of the mantissa (at a half too, but for
    a subnormal); past 2^127, infinity and NaN the code 0xFF."""
    bits = builder.and_(builder.bitcast(value, I32), I32(0x7FFFFFFF))
    e = builder.lshr(bits, I32(23))
    m = builder.and_(bits, I32(0x7FFFFF))
    up = builder.or_(builder.icmp_unsigned(">", m, I32(0x400000)),
                     builder.and_(builder.icmp_unsigned("==", m, I32(0x400000)),
                                  builder.icmp_unsigned(">", e, I32(0))))
    code = builder.add(e, builder.zext(up, I32))
    umin = builder.module.declare_intrinsic("llvm.umin", [I32],
                                            ir.FunctionType(I32, [I32, I32]))
    return builder.trunc(builder.call(umin, [code, I32(0xFF)]), I8)


def _f8_to_f32(builder, name, bits):
    """Exact: the exponent rebiased and the mantissa moved up for a normal code, the
    mantissa scaled for a subnormal one; e4m3's 0x7F is NaN, e5m2's exponent 31 is
    infinity (mantissa 0) or NaN. Integer arithmetic only, no half-precision libcalls."""
    if name == "float8_e8m0fnu":
        return _e8m0_to_f32(builder, bits)
    _e, m, bias, _max = _FLOAT8[name]
    u = builder.zext(bits, I32)
    sign = builder.shl(builder.and_(u, I32(0x80)), I32(24))
    em = builder.and_(u, I32(0x7F))
    normal = builder.add(builder.shl(em, I32(23 - m)), I32((127 - bias) << 23))
    subnormal = builder.bitcast(builder.fmul(builder.uitofp(em, F32),
                                             F32(2.0 ** (1 - bias - m))), I32)
    magnitude = builder.select(builder.icmp_unsigned("<", em, I32(1 << m)), subnormal, normal)
    if name == "float8_e4m3":
        special = builder.icmp_unsigned("==", em, I32(_NAN8))
        value = I32(0x7FC00000)
    else:                               # exponent 31: infinity or NaN
        special = builder.icmp_unsigned(">=", em, I32(0x7C))
        value = builder.select(builder.icmp_unsigned("==", em, I32(0x7C)), I32(0x7F800000),
                               I32(0x7FC00000))
    magnitude = builder.select(special, value, magnitude)
    return builder.bitcast(builder.or_(magnitude, sign), F32)


def _f32_to_f8(builder, name, value):
    """Round to nearest even; NaN becomes 0x7F. e4m3, which has no infinity, saturates
    (PTX's ``cvt.rn.satfinite``: a magnitude past 448, infinity included, becomes 448);
    e5m2 overflows to infinity as float16 does (torch's and ml_dtypes' conversion)."""
    if name == "float8_e8m0fnu":
        return _f32_to_e8m0(builder, value)
    _e, m, bias, largest = _FLOAT8[name]
    bits = builder.bitcast(value, I32)
    sign = builder.and_(builder.lshr(bits, I32(24)), I32(0x80))
    fabs = builder.module.declare_intrinsic("llvm.fabs", [F32])
    a = builder.call(fabs, [value])
    if name == "float8_e4m3":
        minnum = builder.module.declare_intrinsic("llvm.minnum", [F32],
                                                  ir.FunctionType(F32, [F32, F32]))
        a = builder.call(minnum, [a, F32(largest)])
    abits = builder.bitcast(a, I32)
    shift = 23 - m
    lsb = builder.and_(builder.lshr(abits, I32(shift)), I32(1))
    rounded = builder.add(abits, builder.add(I32((1 << (shift - 1)) - 1), lsb))
    normal = builder.sub(builder.lshr(rounded, I32(shift)), I32((127 - bias) << m))
    if name == "float8_e5m2":       # past the largest finite code: infinity (0x7C)
        umin = builder.module.declare_intrinsic("llvm.umin", [I32],
                                                ir.FunctionType(I32, [I32, I32]))
        normal = builder.call(umin, [normal, I32(0x7C)])
    rint = builder.module.declare_intrinsic("llvm.rint", [F32])
    scaled = builder.call(rint, [builder.fmul(a, F32(2.0 ** (bias - 1 + m)))])
    subnormal = builder.fptoui(scaled, I32)
    tiny = builder.fcmp_ordered("<", a, F32(2.0 ** (1 - bias)))
    code = builder.or_(builder.select(tiny, subnormal, normal), sign)
    is_nan = builder.fcmp_unordered("uno", value, value)
    return builder.trunc(builder.select(is_nan, I32(_NAN8), code), I8)


def _f4_to_f32(builder, code):
    """float4_e2m1fn's code (the low 4 bits) → float32, exact: the magnitude's code 0…7
    is 0, 0.5, 1, 1.5, 2, 3, 4, 6, i.e. ``m·2^-1`` below 2 and ``(2 + m)·2^(e-2)`` above,
    computed as ``(code & 7) / 2`` for codes below 4 and from the exponent otherwise."""
    u = builder.and_(builder.zext(code, I32), I32(0xF))
    mag = builder.and_(u, I32(7))
    e = builder.lshr(mag, I32(1))
    m = builder.and_(mag, I32(1))
    # normal (e ≥ 1): float32 bits with exponent e - 1 + 127 and mantissa m << 22
    normal = builder.or_(builder.shl(builder.add(e, I32(126)), I32(23)),
                         builder.shl(m, I32(22)))
    sub = builder.bitcast(builder.fmul(builder.uitofp(m, F32), F32(0.5)), I32)
    bits = builder.select(builder.icmp_unsigned("==", e, I32(0)), sub, normal)
    sign = builder.shl(builder.and_(u, I32(8)), I32(28))
    return builder.bitcast(builder.or_(bits, sign), F32)


def _f32_to_f4(builder, value):
    """float32 → float4_e2m1fn's code (in an i8), as ``numerics.float4_codes``: nearest,
    ties to the even code, saturating at 6 (infinity too), NaN → +6. The magnitude is
    compared with the seven midpoints between the codes' values, each tie going to the
    even neighbour."""
    fabs = builder.module.declare_intrinsic("llvm.fabs", [F32])
    a = builder.call(fabs, [value])
    code = I32(0)
    values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for k in range(7):
        mid = F32((values[k] + values[k + 1]) / 2)
        # above the midpoint, or at it when code k + 1 is the even one
        past = builder.fcmp_ordered(">=" if (k + 1) % 2 == 0 else ">", a, mid)
        code = builder.add(code, builder.zext(past, I32))
    is_nan = builder.fcmp_unordered("uno", value, value)
    negative = builder.icmp_signed("<", builder.bitcast(value, I32), I32(0))
    sign = builder.select(builder.and_(negative, builder.not_(is_nan)), I32(8), I32(0))
    code = builder.select(is_nan, I32(7), builder.or_(code, sign))
    return builder.trunc(code, I8)


def to_f32(builder, ty, bits):
    """The float32 value of a ``StorageFloat``'s bits (exact)."""
    if isinstance(ty, BFloat16):
        return bf16_to_f32(builder, bits)
    if ty.name == "float4_e2m1fn":
        return _f4_to_f32(builder, bits)
    return _f8_to_f32(builder, ty.name, bits)


def from_f32(builder, ty, value):
    """A float32 rounded to a ``StorageFloat``'s bits (nearest even)."""
    if isinstance(ty, BFloat16):
        return f32_to_bf16(builder, value)
    if ty.name == "float4_e2m1fn":
        return _f32_to_f4(builder, value)
    return _f32_to_f8(builder, ty.name, value)


def cast_values(context, builder, values, fromty, toty) -> list:
    """``values`` (consecutive elements) each cast from ``fromty`` to ``toty``. float32
    narrowed to float16 or bfloat16 goes two at a time where the target packs two
    conversions into one instruction: ``cvt.rn.f16x2.f32`` instead of a ``cvt.rn.f16.f32``
    per element, then a permute to pair the halves. The scalar form is a F2F each, on the
    quarter-rate pipe exp2 runs on: in FlashAttention's P = cast(S) as many as the exp2s
    themselves (ncu, H200). Same rounding (to nearest even) either way."""
    if not _packs(fromty, toty) or len(values) < 2:
        return [context.cast(builder, v, fromty, toty) for v in values]
    out = []
    for k in range(0, len(values) - 1, 2):
        out += _packed_narrow(builder, toty, values[k], values[k + 1])
    if len(values) % 2:
        out.append(context.cast(builder, values[-1], fromty, toty))
    return out


def _packs(fromty, toty) -> bool:
    """Whether ``cast_values`` narrows pairs of ``fromty`` to ``toty`` in one instruction."""
    config = current_kernel_or_none()
    return (fromty == types.float32 and (toty == types.float16 or isinstance(toty, BFloat16))
            and config is not None and config.target.has_packed_half_conversion)


def narrowed_pair(builder, values, fromty, toty):
    """The i32 register of two consecutive elements that ``cast_values`` narrows in one
    instruction (the first in the low half), for a store of both at once; None where
    it would not."""
    if len(values) != 2 or not _packs(fromty, toty):
        return None
    return _packed_bits(builder, toty, *values)


def _packed_bits(builder, toty, lo, hi):
    """The instruction itself, ``d = {a, b}`` with a in the upper half (LLVM selects
    cvt.rn.f16x2.f32 for a vector fptrunc, but splits it again where the halves are used
    apart, as in a store per element)."""
    name = "f16x2" if toty == types.float16 else "bf16x2"
    return builder.asm(ir.FunctionType(I32, [F32, F32]), f"cvt.rn.{name}.f32 $0, $1, $2;",
                       "=r,f,f", [hi, lo], side_effect=False)


def _packed_narrow(builder, toty, lo, hi) -> list:
    """The two halves of ``_packed_bits``; bfloat16 is i16 bits here (llvmlite has no
    bfloat type)."""
    bits = _packed_bits(builder, toty, lo, hi)
    halves = [builder.trunc(bits, I16), builder.trunc(builder.lshr(bits, I32(16)), I16)]
    if toty == types.float16:
        halves = [builder.bitcast(h, ir.HalfType()) for h in halves]
    return halves


@lower_cast(StorageFloat, types.Number)
@lower_cast(StorageFloat, types.Boolean)
def storage_float_to_number(context, builder, fromty, toty, val):
    if fromty == toty:
        return val
    return context.cast(builder, to_f32(builder, fromty, val), types.float32, toty)


@lower_cast(StorageFloat, StorageFloat)
def storage_float_to_storage_float(context, builder, fromty, toty, val):
    """bfloat16, float8 and float4 to one another: through float32, which holds each
    exactly (the one rounding is the target's)."""
    if fromty == toty:
        return val
    return from_f32(builder, toty, to_f32(builder, fromty, val))


@lower_cast(types.Number, StorageFloat)
@lower_cast(types.Boolean, StorageFloat)
def number_to_storage_float(context, builder, fromty, toty, val):
    if fromty == toty:
        return val
    return from_f32(builder, toty, context.cast(builder, val, fromty, types.float32))


@lower(T.cast, types.Any, types.StringLiteral)
@lower(T.cast, types.Any, DTypeType)
@lower(T.cast, types.Any, types.NumberClass)        # numpy's scalar type: np.float32
def cast_impl(context, builder, sig, args):
    fromty = sig.args[0]
    toty = sig.return_type
    # float -> int: fptosi/fptoui truncate toward zero, as C and TileLang do
    value = context.cast(builder, args[0], fromty, toty)
    dtype = named_dtype(sig.args[1])
    if dtype is not None and dtype.is_packed_int:      # held in a byte: the low four bits
        if dtype.kind == "uint":
            value = builder.and_(value, value.type(0xF))
        else:                                           # (int4: signed)
            value = builder.ashr(builder.shl(value, value.type(4)), value.type(4))
    return impl_ret_untracked(context, builder, toty, value)


@lower(T.reinterpret, types.Number, types.StringLiteral)
@lower(T.reinterpret, types.Number, DTypeType)
@lower(T.reinterpret, types.Number, types.NumberClass)
def reinterpret_impl(context, builder, sig, args):
    return _bitcast(context, builder, args[0], sig.args[0], sig.return_type)


@lower(T.reinterpret, types.StringLiteral, types.Number)
@lower(T.reinterpret, DTypeType, types.Number)
@lower(T.reinterpret, types.NumberClass, types.Number)
def reinterpret_old_order_impl(context, builder, sig, args):
    """TileLang's deprecated ``T.reinterpret(dtype, value)``."""
    return _bitcast(context, builder, args[1], sig.args[1], sig.return_type)


def _bitcast(context, builder, value, ty, to):
    """``value`` (of ``ty``)'s bits as ``to``; an integer of another width is cut to (a
    wider one's low bits) or zero-extended to ``to``'s width first."""
    ty, bits = types.unliteral(ty), getattr(to, "bitwidth", None)
    if isinstance(ty, types.Integer) and bits is not None and ty.bitwidth != bits:
        width = ir.IntType(bits)
        value = (builder.trunc(value, width) if ty.bitwidth > bits
                 else builder.zext(value, width))
    return builder.bitcast(value, context.get_value_type(to))


def _truth(context, builder, ty, value):
    """A condition's i1: a boolean as it is, an integer ``!= 0``."""
    if isinstance(ty, types.Boolean):
        return context.cast(builder, value, ty, types.boolean)
    return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


@lower(T.And, types.Any, types.Any)
def tir_and_impl(context, builder, sig, args):
    """TIR's ``T.And`` in a helper: both operands evaluated, then combined."""
    a, b = (_truth(context, builder, t, v) for t, v in zip(sig.args, args))
    return builder.and_(a, b)


@lower(T.Or, types.Any, types.Any)
def tir_or_impl(context, builder, sig, args):
    a, b = (_truth(context, builder, t, v) for t, v in zip(sig.args, args))
    return builder.or_(a, b)


@lower(T.Not, types.Any)
def tir_not_impl(context, builder, sig, args):
    return builder.not_(_truth(context, builder, sig.args[0], args[0]))


@lower(T.if_then_else, types.boolean, types.Any, types.Any)
def if_then_else_impl(context, builder, sig, args):
    cond, a, b = args
    return builder.select(cond, a, b)


def _min_max(context, builder, ty, a, b, is_max):
    if isinstance(ty, types.Float):
        # llvm.maxnum/minnum: the non-NaN operand when one is NaN (PTX max/min.f32)
        name = "llvm.maxnum" if is_max else "llvm.minnum"
        fnty = ir.FunctionType(a.type, [a.type, a.type])
        fn = builder.module.declare_intrinsic(name, [a.type], fnty)
        return builder.call(fn, [a, b])
    if isinstance(ty, StorageFloat):
        fa, fb = to_f32(builder, ty, a), to_f32(builder, ty, b)
        return from_f32(builder, ty, _min_max(context, builder, types.float32, fa, fb, is_max))
    signed = getattr(ty, "signed", False)
    op = (">" if is_max else "<")
    cmp = builder.icmp_signed(op, a, b) if signed else builder.icmp_unsigned(op, a, b)
    return builder.select(cmp, a, b)


@lower(T.max, types.Any, types.Any)
def max_impl(context, builder, sig, args):
    return _min_max(context, builder, sig.return_type, *args, True)


@lower(T.min, types.Any, types.Any)
def min_impl(context, builder, sig, args):
    return _min_max(context, builder, sig.return_type, *args, False)


@lower(T.clamp, types.Any, types.Any, types.Any)
def clamp_impl(context, builder, sig, args):
    """``T.min(T.max(x, lo), hi)``, TileLang's order (a NaN x gives lo)."""
    x, lo, hi = args
    ty = sig.return_type
    return _min_max(context, builder, ty, _min_max(context, builder, ty, x, lo, True), hi,
                    False)


@lower(T.__ldg, types.Any)
def ldg_impl(context, builder, sig, args):
    """``T.__ldg(x[i])`` in a helper: the element, already loaded."""
    return args[0]


@lower(T.__ldg, types.Any, types.Any)
def ldg_index_impl(context, builder, sig, args):
    """``T.__ldg(x, i)`` in a helper: ``x[i]``."""
    load = context.get_function(operator.getitem, sig)
    return load(builder, args)


@lower(T.abs, types.Any)
def abs_impl(context, builder, sig, args):
    (x,) = args
    ty = sig.return_type
    if isinstance(ty, types.Float):
        fn = builder.module.declare_intrinsic("llvm.fabs", [x.type])
        return builder.call(fn, [x])
    if isinstance(ty, StorageFloat):        # clear the sign bit
        return builder.and_(x, x.type((1 << (ty.bitwidth - 1)) - 1))
    if not ty.signed:
        return x
    neg = builder.neg(x)
    return builder.select(builder.icmp_signed("<", x, x.type(0)), neg, x)


@lower(T.ceildiv, types.Integer, types.Integer)
def ceildiv_impl(context, builder, sig, args):
    a, b = args
    num = builder.sub(builder.add(a, b), a.type(1))
    return builder.sdiv(num, b) if sig.args[0].signed else builder.udiv(num, b)


def _constant(context, builder, ty, value):
    """``value`` as a constant of the numeric type ``ty`` (a storage float converted from
    float32, as its stores round: float8_e4m3's infinity is its largest, 448)."""
    if isinstance(ty, StorageFloat):
        return from_f32(builder, ty, F32(value))
    if isinstance(ty, types.Integer):
        return context.get_constant(ty, int(value))
    return context.get_value_type(ty)(value)


@lower(T.infinity, types.StringLiteral)
@lower(T.infinity, DTypeType)
def infinity_impl(context, builder, sig, args):
    return _constant(context, builder, sig.return_type, math.inf)


@lower(T.max_value, types.StringLiteral)
@lower(T.max_value, DTypeType)
def max_value_impl(context, builder, sig, args):
    return _constant(context, builder, sig.return_type,
                     finite_range(named_dtype(sig.args[0]))[1])


@lower(T.min_value, types.StringLiteral)
@lower(T.min_value, DTypeType)
def min_value_impl(context, builder, sig, args):
    return _constant(context, builder, sig.return_type,
                     finite_range(named_dtype(sig.args[0]))[0])


@lower(T.reducer_identity, types.StringLiteral, types.StringLiteral)
@lower(T.reducer_identity, types.StringLiteral, DTypeType)
def reducer_identity_impl(context, builder, sig, args):
    largest = sig.args[0].literal_value == "min"        # where a min starts
    dtype = named_dtype(sig.args[1])
    value = (math.inf if largest else -math.inf) if dtype.is_float else \
        finite_range(dtype)[1 if largest else 0]
    return _constant(context, builder, sig.return_type, value)


@lower(DTypeType, types.Any)
@lower("number.astype", types.Number, types.StringLiteral)
@lower("number.astype", types.Number, DTypeType)
@lower("number.astype", types.Boolean, types.StringLiteral)
@lower("number.astype", types.Boolean, DTypeType)
@lower(tir_exprs.const, types.Any)
@lower(tir_exprs.const, types.Any, types.NoneType)
@lower(tir_exprs.const, types.Any, types.Omitted)
@lower(tir_exprs.const, types.Any, types.StringLiteral)
@lower(tir_exprs.const, types.Any, DTypeType)
def dtype_call(context, builder, sig, args):
    """``T.float32(x)``, TIR's ``x.astype(dtype)`` and ``tirx.const(x, dtype)``: x
    converted to the dtype (``tirx.const(x)``: x itself)."""
    return context.cast(builder, args[0], sig.args[0], sig.return_type)


@lower_getattr(types.Number, "dtype")
@lower_getattr(types.Boolean, "dtype")
def number_dtype(context, builder, ty, val):
    return context.get_dummy_value()


@lower(operator.eq, DTypeType, DTypeType)
@lower(operator.eq, DTypeType, types.StringLiteral)
@lower(operator.eq, types.StringLiteral, DTypeType)
@lower(operator.ne, DTypeType, DTypeType)
@lower(operator.ne, DTypeType, types.StringLiteral)
@lower(operator.ne, types.StringLiteral, DTypeType)
def dtype_compare(context, builder, sig, args):
    """Two dtypes compared: the typing's literal answer."""
    return ir.Constant(ir.IntType(1), int(sig.return_type.literal_value))


@lower(tir_exprs.Cast, types.StringLiteral, types.Any)
@lower(tir_exprs.Cast, DTypeType, types.Any)
def tir_cast(context, builder, sig, args):
    return context.cast(builder, args[1], sig.args[1], sig.return_type)


@lower(tir_exprs.Select, types.Any, types.Any, types.Any)
def tir_select(context, builder, sig, args):
    impl = context.get_function(T.if_then_else, sig)
    return impl(builder, args)


@lower(tir_exprs.reinterpret, types.StringLiteral, types.Number)
@lower(tir_exprs.reinterpret, DTypeType, types.Number)
def tir_reinterpret(context, builder, sig, args):
    """An integer cut or zero-extended to the dtype's width, then its bits."""
    return _bitcast(context, builder, args[1], sig.args[1], sig.return_type)

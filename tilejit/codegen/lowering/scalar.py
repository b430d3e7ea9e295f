"""Scalar rules: the weak float, bfloat16 conversions, casts, select, min/max, abs,
ceildiv, typed constants."""
from __future__ import annotations

import math

from llvmlite import ir
from numba.core import types
from numba.core.imputils import impl_ret_untracked

from tilejit import language as T
from tilejit.codegen.typing.types import BFloat16, DTypeType, WeakFloat
from tilejit.codegen.lowering.registry import lower, lower_cast, lower_constant

I16, I32, F32 = ir.IntType(16), ir.IntType(32), ir.FloatType()


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


@lower_cast(BFloat16, types.Number)
def bf16_to_number(context, builder, fromty, toty, val):
    return context.cast(builder, bf16_to_f32(builder, val), types.float32, toty)


@lower_cast(BFloat16, types.Boolean)
def bf16_to_bool(context, builder, fromty, toty, val):
    return context.cast(builder, bf16_to_f32(builder, val), types.float32, toty)


@lower_cast(types.Number, BFloat16)
@lower_cast(types.Boolean, BFloat16)
def number_to_bf16(context, builder, fromty, toty, val):
    if isinstance(fromty, BFloat16):
        return val
    return f32_to_bf16(builder, context.cast(builder, val, fromty, types.float32))


@lower(T.cast, types.Any, types.StringLiteral)
@lower(T.cast, types.Any, DTypeType)
def cast_impl(context, builder, sig, args):
    fromty = sig.args[0]
    toty = sig.return_type
    value = args[0]
    # float -> int: fptosi/fptoui truncate toward zero, as C and TileLang do
    return impl_ret_untracked(context, builder, toty, context.cast(builder, value, fromty, toty))


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
    if isinstance(ty, BFloat16):
        fa, fb = bf16_to_f32(builder, a), bf16_to_f32(builder, b)
        return f32_to_bf16(builder, _min_max(context, builder, types.float32, fa, fb, is_max))
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


@lower(T.abs, types.Any)
def abs_impl(context, builder, sig, args):
    (x,) = args
    ty = sig.return_type
    if isinstance(ty, types.Float):
        fn = builder.module.declare_intrinsic("llvm.fabs", [x.type])
        return builder.call(fn, [x])
    if isinstance(ty, BFloat16):
        return builder.and_(x, I16(0x7FFF))
    if not ty.signed:
        return x
    neg = builder.neg(x)
    return builder.select(builder.icmp_signed("<", x, x.type(0)), neg, x)


@lower(T.ceildiv, types.Integer, types.Integer)
def ceildiv_impl(context, builder, sig, args):
    a, b = args
    num = builder.sub(builder.add(a, b), a.type(1))
    return builder.sdiv(num, b) if sig.args[0].signed else builder.udiv(num, b)


@lower(T.infinity, types.StringLiteral)
@lower(T.infinity, DTypeType)
def infinity_impl(context, builder, sig, args):
    ty = sig.return_type
    if isinstance(ty, BFloat16):
        return I16(0x7F80)
    return context.get_value_type(ty)(math.inf)


@lower(DTypeType, types.Any)
def dtype_call(context, builder, sig, args):
    """``T.float32(x)``: x converted to the dtype."""
    return context.cast(builder, args[0], sig.args[0], sig.return_type)

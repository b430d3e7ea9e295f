"""``language/math_intrinsics.py`` as LLVM IR.

- The IEEE-rounded operations on float32 and float64: NVVM's rounding-mode intrinsics,
  ``llvm.nvvm.add.rz.f`` → ``add.rz.f32`` (TileLang's ``ru``/``rd`` are PTX's
  ``rp``/``rm``); a subtraction is an addition of the negated operand (exact). An
  instruction with an explicit rounding mode is never fused with another, so
  ``ieee_mul`` then ``ieee_add`` stay two roundings. On float16 and bfloat16 the same
  ``.rn`` float32 instruction, then the conversion to the type (``cvt.rn``). The directed
  modes need the NVPTX instructions; AMDGPU takes ``"rn"`` only (its IEEE operations
  without fast-math flags).
- ``ieee_frsqrt``: ``sqrt.rn.f64``, ``div.rn.f64``, then float32, then the operand's type.
- The fast functions: the special function unit's forms of ``codegen/lowering/math.py``
  and ``trig.py`` (their ``fast`` paths) on float32 and the half types, where the target
  has that unit; the accurate functions otherwise, and on float64.
"""
from __future__ import annotations

import math

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.language.math_intrinsics import FAST_UNARY, IEEE_OPS
from tilejit.language.packed import PACKED_OPS
from tilejit.ir.kernel_config import current_kernel_or_none
from tilejit.codegen.lowering.math import F32, F64, _E, _in_float32, exp, log, log2
from tilejit.codegen.lowering import scalar as lowering_scalar
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar_math import exp10, log10
from tilejit.codegen.lowering.tiles import intrinsic
from tilejit.codegen.lowering.trig import cos, sin, tan

# TileLang's rounding modes as PTX's
I32 = ir.IntType(32)

_PTX_MODE = {"rn": "rn", "rz": "rz", "ru": "rp", "rd": "rm"}
# the NVVM operation and its operand count of each rounded operation
_OPS = {"ieee_add": "add", "ieee_sub": "add", "ieee_mul": "mul", "ieee_fdiv": "div",
        "ieee_fmaf": "fma", "ieee_frcp": "rcp", "ieee_fsqrt": "sqrt"}


def _nvptx() -> bool:
    config = current_kernel_or_none()
    return config is None or config.target.kind != "amdgpu"


def _rounded(builder, name: str, mode: str, values):
    """One rounded operation on float or double ``values``."""
    ty = values[0].type
    if name == "ieee_sub":
        values = [values[0], builder.fneg(values[1])]
    if not _nvptx():
        if mode != "rn":
            raise CompileError(f"T.{name}: rounding mode {mode!r} needs NVIDIA's rounded "
                               "instructions; on AMDGPU only 'rn' is built")
        return _plain(builder, name, values)
    op = _OPS[name]
    sfx = "f" if ty == F32 else "d"
    fn = intrinsic(builder, f"llvm.nvvm.{op}.{_PTX_MODE[mode]}.{sfx}", ty, [ty] * len(values))
    return builder.call(fn, values)


def _plain(builder, name, values):
    """IEEE operations rounded to nearest, each marked exact so that the target's
    multiply-add contraction (``contract_multiply_add``) leaves it alone: ``ieee_mul``
    then ``ieee_add`` stay two roundings."""
    ty = values[0].type
    e = _E(builder, ty)
    op = _OPS[name]
    if op == "add":
        return e._exact(builder.fadd(*values))
    if op == "mul":
        return e._exact(builder.fmul(*values))
    if op == "div":
        return e._exact(builder.fdiv(*values))
    if op == "rcp":
        return e._exact(builder.fdiv(ir.Constant(ty, 1.0), values[0]))
    suffix = "f32" if ty == F32 else "f64"
    fn = intrinsic(builder, f"llvm.{op}.{suffix}", ty, [ty] * len(values))
    return builder.call(fn, values)


def _rounded_rule(name: str):
    n = IEEE_OPS[name]

    def impl(context, builder, sig, args):
        mode = sig.args[n].literal_value if len(sig.args) > n else "rn"
        if sig.return_type in (types.float32, types.float64):
            return _rounded(builder, name, mode, list(args[:n]))
        return _in_float32(builder, sig.return_type,
                           lambda *xs: _rounded(builder, name, "rn", list(xs)), args[:n])
    impl.__name__ = f"{name}_impl"
    return impl


def _rsqrt_rule(context, builder, sig, args):
    def build(x):
        d = builder.fpext(x, F64)
        if _nvptx():
            sqrt = builder.call(intrinsic(builder, "llvm.nvvm.sqrt.rn.d", F64, [F64]), [d])
            r = builder.call(intrinsic(builder, "llvm.nvvm.div.rn.d", F64, [F64, F64]),
                             [ir.Constant(F64, 1.0), sqrt])
        else:
            sqrt = builder.call(intrinsic(builder, "llvm.sqrt.f64", F64, [F64]), [d])
            r = builder.fdiv(ir.Constant(F64, 1.0), sqrt)
        return builder.fptrunc(r, F32)
    return _in_float32(builder, sig.return_type, build, args)


def rcp(builder, x, fast=False):
    """1/x: ``rcp.approx.ftz.f32`` where ``fast``, else the division."""
    if fast:
        return builder.call(intrinsic(builder, "llvm.nvvm.rcp.approx.ftz.f", F32, [F32]), [x])
    return builder.fdiv(ir.Constant(x.type, 1.0), x)


_FAST = {"__exp": exp, "__exp10": exp10, "__log": log, "__log2": log2, "__log10": log10,
         "__sin": sin, "__cos": cos, "__tan": tan, "fast_rcp": rcp}


def _fast_rule(name: str):
    build = _FAST[name]

    def impl(context, builder, sig, args):
        config = current_kernel_or_none()
        fast = config is not None and config.target.has_special_function_unit
        return _in_float32(builder, sig.return_type,
                           lambda x: build(builder, x, fast=fast and x.type == F32), args)
    impl.__name__ = f"{name.strip('_')}_fast_impl"
    return impl


def _fma_half(builder, a, b, c):
    """float16 x · y + z rounded once (``language/packed.fma_half_odd`` says how): float32
    rounded to odd, then to float16."""
    wide = [builder.fpext(v, F32) for v in (a, b, c)]
    return builder.fptrunc(fma_half_odd(builder, *wide), ir.HalfType())


def fma_half_odd(builder, a, b, c):
    """x · y + z of float16 values given as float32, in float32 rounded to odd."""
    e = _E(builder, F32)
    p = e._exact(builder.fmul(a, b))                 # exact: 11 + 11 bits
    s = e._exact(builder.fadd(p, c))
    bb = e._exact(builder.fsub(s, p))
    err = e._exact(builder.fadd(e._exact(builder.fsub(p, e._exact(builder.fsub(s, bb)))),
                                e._exact(builder.fsub(c, bb))))
    bits = builder.bitcast(s, I32)
    inexact = builder.fcmp_ordered("!=", err, ir.Constant(F32, 0.0))
    even = builder.icmp_unsigned("==", builder.and_(bits, I32(1)), I32(0))
    finite = builder.fcmp_ordered("<", builder.call(
        builder.module.declare_intrinsic("llvm.fabs", [F32]), [s]), ir.Constant(F32, math.inf))
    up = builder.icmp_unsigned("==", builder.fcmp_ordered(">", err, ir.Constant(F32, 0.0)),
                               builder.fcmp_ordered(">", s, ir.Constant(F32, 0.0)))
    toward = builder.select(up, builder.add(bits, I32(1)), builder.sub(bits, I32(1)))
    odd = builder.and_(builder.and_(inexact, even), finite)
    return builder.bitcast(builder.select(odd, toward, bits), F32)


def _fma2_rule(context, builder, sig, args):
    if sig.return_type == types.float16:
        return _fma_half(builder, *args)
    return _rounded_rule("ieee_fmaf")(context, builder, sig, args)


def _packed_rule(scalar: str):
    """One lane of a packed x2 operation: the scalar operation it is (rounded to
    nearest)."""
    if scalar == "ieee_fmaf":
        return _fma2_rule
    if scalar in IEEE_OPS:
        return _rounded_rule(scalar)
    return {"max": lowering_scalar.max_impl, "min": lowering_scalar.min_impl,
            "abs": lowering_scalar.abs_impl}[scalar]


def _register():
    for name, (n, scalar) in PACKED_OPS.items():
        lower(getattr(T, name), *([types.Any] * n))(_packed_rule(scalar))
    for name in IEEE_OPS:
        fn = getattr(T, name)
        lower(fn, types.Any, *([types.Any] * (IEEE_OPS[name] - 1)))(_rounded_rule(name))
        lower(fn, *([types.Any] * IEEE_OPS[name]), types.StringLiteral)(_rounded_rule(name))
    lower(T.ieee_frsqrt, types.Any)(_rsqrt_rule)
    for name in FAST_UNARY:
        lower(getattr(T, name), types.Any)(_fast_rule(name))


_register()

"""Typing of ``language/math_intrinsics.py``: the IEEE-rounded operations (their rounding
mode a string literal; float16 and bfloat16 only ``"rn"``) and the fast functions (its
lowering: ``codegen/lowering/math_intrinsics.py``). Each takes float16, bfloat16,
float32 or float64 values (a Python float takes its partner's type, or float32), as
TileLang's do, and returns their type."""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit import language as T
from tilejit.language.math_intrinsics import (FAST_UNARY, HALF_TYPES, IEEE_DTYPES, IEEE_OPS,
                                              IEEE_ROUNDING_MODES, half_mode_message)
from tilejit.language.packed import PACKED_OPS
from tilejit.language.packed import expected as packed_error
from tilejit.codegen.typing.templates import _common, infer_global
from tilejit.codegen.typing.types import WeakFloat

TRIG = ("__sin", "__cos", "__tan")


def float_operands(name: str, args) -> types.Type:
    """The values' common type, one of float16/bfloat16/float32/float64; a TypingError
    naming the first other type."""
    for a in args:
        ty = types.unliteral(a)
        if isinstance(ty, WeakFloat):
            continue
        if getattr(ty, "name", None) not in IEEE_DTYPES:
            raise errors.TypingError(f"T.{name} only supports floating-point inputs, but got "
                                     f"{ty} (float16, bfloat16, float32 or float64)")
    ty = types.unliteral(_common(args, f"T.{name}"))
    return types.float32 if isinstance(ty, WeakFloat) else ty


class _Rounded(AbstractTemplate):
    """``T.ieee_<op>(values..., rounding_mode="rn")``."""

    def generic(self, args, kws):
        name = self.key.__name__
        n = IEEE_OPS[name]
        if kws or len(args) not in (n, n + 1):
            raise errors.TypingError(f"T.{name} takes {n} value(s) and a rounding mode, got "
                                     f"{len(args)} argument(s){' and keywords' if kws else ''}")
        values, mode = args[:n], (args[n] if len(args) > n else None)
        if mode is not None and not isinstance(mode, types.StringLiteral):
            raise errors.TypingError(f"T.{name}: the rounding mode must be a compile-time "
                                     f"string ({', '.join(IEEE_ROUNDING_MODES)}) written in "
                                     f"the call, got a run-time {mode}")
        if mode is not None and mode.literal_value not in IEEE_ROUNDING_MODES:
            raise errors.TypingError(f"T.{name}: Invalid rounding mode "
                                     f"{mode.literal_value!r}; expected one of "
                                     f"{', '.join(IEEE_ROUNDING_MODES)}")
        ty = float_operands(name, values)
        if ty.name in HALF_TYPES and mode is not None and mode.literal_value != "rn":
            raise errors.TypingError(half_mode_message(name, ty.name, mode.literal_value))
        return signature(ty, *([ty] * n), *([mode] if mode is not None else []))


class _RoundedRsqrt(AbstractTemplate):
    key = T.ieee_frsqrt

    def generic(self, args, kws):
        if kws or len(args) != 1:
            raise errors.TypingError("T.ieee_frsqrt takes one value")
        ty = float_operands("ieee_frsqrt", args)
        if ty == types.float64:
            raise errors.TypingError("T.ieee_frsqrt: frsqrt is not supported for float64 "
                                     "(float32, float16 and bfloat16 are)")
        return signature(ty, ty)


class _Fast(AbstractTemplate):
    def generic(self, args, kws):
        name = self.key.__name__
        if kws or len(args) != 1:
            raise errors.TypingError(f"T.{name} takes one value")
        ty = float_operands(name, args)
        if name in TRIG and ty == types.float64:
            raise errors.TypingError(f"T.{name}: float64 is not supported (float32, float16 "
                                     "and bfloat16 are)")
        return signature(ty, ty)


class _Packed(AbstractTemplate):
    """``T.add2`` ... (``language/packed.py``): one lane's operation on values of one of
    float32, float16, bfloat16."""

    def generic(self, args, kws):
        name = self.key.__name__
        n = PACKED_OPS[name][0]
        if kws or len(args) != n:
            raise errors.TypingError(f"T.{name} takes {n} packed value(s), got {len(args)} "
                                     f"argument(s){' and keywords' if kws else ''}")
        tys = [types.unliteral(a) for a in args]
        # a float literal (T.Broadcast(1.0, 2)) takes its partners' type, or float32
        typed = [t for t in tys if not isinstance(t, WeakFloat)] or [types.float32]
        message = packed_error(name, [getattr(t, "name", str(t)) for t in typed])
        if message is not None:
            raise errors.TypingError(message)
        return signature(typed[0], *([typed[0]] * n))


def _register():
    for name in PACKED_OPS:
        fn = getattr(T, name)
        infer_global(fn)(type(f"{name.title()}Template", (_Packed,), {"key": fn}))
    for name in IEEE_OPS:
        fn = getattr(T, name)
        infer_global(fn)(type(f"{name.title()}Template", (_Rounded,), {"key": fn}))
    infer_global(T.ieee_frsqrt)(_RoundedRsqrt)
    for name in FAST_UNARY:
        fn = getattr(T, name)
        infer_global(fn)(type(f"Fast{name.strip('_').title()}Template", (_Fast,), {"key": fn}))


_register()

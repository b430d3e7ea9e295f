"""Typing of ``language/scalar_math.py``: trigonometry, exp10 / log10 / log1p,
rounding, classification, copysign and bit counts (their lowering:
``codegen/lowering/trig.py`` and ``codegen/lowering/scalar_math.py``)."""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit import language as T
from tilejit.language.scalar_math import (BIT_COUNTS, CLASSIFY, ELEMENTARY,
                                          ELEMENTARY_BINARY, FLOAT_UNARY, ROUNDING_MODES)
from tilejit.codegen.typing.templates import _common, _math_result, _UnaryMath, infer_global

# computed in float64 for float32: float64 itself is not built
NO_DOUBLE = ("sin", "cos", "tan", *ELEMENTARY, *ELEMENTARY_BINARY)


def _no_double(name, ty):
    if name in NO_DOUBLE and ty == types.float64:
        raise errors.TypingError(f"T.{name}: float64 is not supported (float32, float16 and "
                                 f"bfloat16 are)")
    return ty


class _FloatUnary(_UnaryMath):
    def generic(self, args, kws):
        sig = super().generic(args, kws)
        _no_double(self.key.__name__, sig.return_type)
        return sig


class _Classify(AbstractTemplate):
    def generic(self, args, kws):
        name = f"T.{self.key.__name__}"
        if kws or len(args) != 1 or not isinstance(args[0], (types.Number, types.Boolean)):
            raise errors.TypingError(f"{name} takes one number, got {args}")
        return signature(types.boolean, types.unliteral(args[0]))


class _BitCount(AbstractTemplate):
    def generic(self, args, kws):
        name = f"T.{self.key.__name__}"
        if kws or len(args) != 1 or not isinstance(types.unliteral(args[0]), types.Integer):
            raise errors.TypingError(f"{name} takes one integer, got {args}")
        return signature(types.int32, types.unliteral(args[0]))


class RoundTemplate(AbstractTemplate):
    """``T.round(x)`` / ``T.round(x, "ties-away-from-zero")``: the mode a string
    literal (the front end passes ``rounding_mode=`` positionally)."""
    key = T.round

    def generic(self, args, kws):
        if kws or not 1 <= len(args) <= 2:
            raise errors.TypingError("T.round(x, rounding_mode='ties-to-even') takes a value "
                                     "and a rounding mode")
        if len(args) == 2 and not (isinstance(args[1], types.StringLiteral)
                                   and args[1].literal_value in ROUNDING_MODES):
            raise errors.TypingError(f"T.round: rounding_mode must be one of "
                                     f"{ROUNDING_MODES} written in the call, got {args[1]}")
        if not isinstance(args[0], (types.Number, types.Boolean)):
            raise errors.TypingError(f"T.round expects a number, got {args[0]}")
        ret = _math_result(args[0])
        return signature(ret, ret, *args[1:])


class CopysignTemplate(AbstractTemplate):
    key = T.copysign

    def generic(self, args, kws):
        if kws or len(args) != 2:
            raise errors.TypingError(f"T.copysign takes two values, got {len(args)}")
        ret = _math_result(_common(args, "T.copysign"))
        return signature(ret, ret, ret)


class _ElementaryBinary(AbstractTemplate):
    """``T.atan2(y, x)`` and ``T.hypot(x, y)``: two values of their common float type."""

    def generic(self, args, kws):
        name = self.key.__name__
        if kws or len(args) != 2:
            raise errors.TypingError(f"T.{name} takes two values, got {len(args)}")
        ret = _no_double(name, _math_result(_common(args, f"T.{name}")))
        return signature(ret, ret, ret)


def _register():
    for name in ELEMENTARY_BINARY:
        fn = getattr(T, name)
        infer_global(fn)(type(f"{name.title()}Template", (_ElementaryBinary,), {"key": fn}))
    for names, base in ((FLOAT_UNARY, _FloatUnary), (CLASSIFY, _Classify),
                        (BIT_COUNTS, _BitCount)):
        for name in names:
            fn = getattr(T, name)
            infer_global(fn)(type(f"{name.title()}Template", (base,), {"key": fn}))
    infer_global(T.round)(RoundTemplate)
    infer_global(T.copysign)(CopysignTemplate)


_register()

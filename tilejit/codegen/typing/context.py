"""tilejit's Numba typing context: Numba's builtin typing plus the tile language's,
with two rules of its own applied to every numeric operation:

1. weak scalars: a Python number literal (or run-time Python float) takes the dtype of
   the typed operand it meets; float64 appears only where a float64 value asks for it;
2. half types (float16, bfloat16) compute in float32 and round the result back.

Integer literal arithmetic folds at typing time (``block_M * 2`` stays a compile-time
constant), which is what makes tile extents such as ``T.Parallel(block_M * 2)`` legal.
"""
from __future__ import annotations

import numpy as np

import operator
import types as pytypes

from numba.core import types
from numba.core.errors import TypingError
from numba.core.typing import BaseContext, signature
from numba.core.typing.templates import builtin_registry

from tilejit.language.dtypes import DType, as_dtype, is_torch_dtype
from tilejit.codegen.typing.types import (DTypeType, Float4, StorageFloat, WeakFloat, is_half,
                                          weak_float)

_ARITH = {operator.add: operator.add, operator.sub: operator.sub,
          operator.mul: operator.mul, operator.floordiv: operator.floordiv,
          operator.mod: operator.mod, operator.lshift: operator.lshift,
          operator.rshift: operator.rshift, operator.and_: operator.and_,
          operator.or_: operator.or_, operator.xor: operator.xor,
          operator.iadd: operator.add, operator.isub: operator.sub,
          operator.imul: operator.mul, operator.ifloordiv: operator.floordiv,
          operator.imod: operator.mod}
_FLOAT_RESULT = {operator.truediv, operator.itruediv, operator.pow, operator.ipow}
_COMPARE = {operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}
_UNARY = {operator.neg, operator.pos}
NUMERIC_OPS = set(_ARITH) | _FLOAT_RESULT | _COMPARE | _UNARY


# ``+ - *`` of unsigned integers of at most 32 bits among which a uint32: C's, so
# TileLang's, wrapping unsigned arithmetic (a hash's, a generator's), not Numba's 64 bits
_WRAPPING = {operator.add, operator.sub, operator.mul, operator.iadd, operator.isub,
             operator.imul}


def _unsigned_32(args) -> bool:
    """Whether every operand is an unsigned integer of at most 32 bits (or a literal in
    uint32's range), not a boolean, and one is a uint32 variable: C computes them in
    uint32. (A signed operand keeps Numba's 64 bits: the simulator holds a loop's index as
    int64, which the GPU may type narrower.)"""
    if not all(isinstance(a, types.Integer) for a in args):
        return False
    strong = [a for a in args if not isinstance(a, types.IntegerLiteral)]
    return any(a == types.uint32 for a in strong) and all(
        not a.signed and a.bitwidth <= 32 for a in strong) and all(
        0 <= a.literal_value <= 0xFFFFFFFF for a in args
        if isinstance(a, types.IntegerLiteral))


def _is_weak(ty) -> bool:
    return isinstance(ty, (WeakFloat, types.IntegerLiteral, types.BooleanLiteral))


def _is_strong_float(ty) -> bool:
    return (isinstance(ty, types.Float) and not isinstance(ty, WeakFloat)) or isinstance(
        ty, StorageFloat)


def widest_float(tys):
    """The float type of mixed strong floats: f16 + bf16 -> f32, else the widest."""
    tys = set(tys)
    if len(tys) == 1:
        return tys.pop()
    best = max(tys, key=lambda t: t.bitwidth)
    return best if best.bitwidth > 16 else types.float32


def harmonize(args):
    """The operand types a numeric operation is carried out in, by the weak-scalar
    rules; returns (compute types, result dtype or None when Numba's rules apply)."""
    nums = [a for a in args if isinstance(a, (types.Number, types.Boolean))]
    if len(nums) != len(args):
        return args, None
    strong_floats = [a for a in args if _is_strong_float(a)]
    if strong_floats:
        target = widest_float(strong_floats)
        if isinstance(target, Float4):      # no arithmetic in 4 bits: float32 (Float4)
            target = types.float32
    elif any(isinstance(a, WeakFloat) for a in args):
        strong_ints = [a for a in args if isinstance(a, types.Integer) and not _is_weak(a)]
        target = types.float32 if strong_ints else weak_float
    else:
        strong_ints = [types.unliteral(a) for a in args
                       if isinstance(a, types.Integer) and not _is_weak(a)]
        if not strong_ints or len(strong_ints) == len(args):
            return args, None
        target = max(strong_ints, key=lambda t: (t.bitwidth, not t.signed))
        if any(isinstance(a, types.IntegerLiteral) and not _fits(a.literal_value, target)
               for a in args):
            return args, None
    compute = types.float32 if is_half(target) else (
        types.float64 if isinstance(target, WeakFloat) else target)
    return tuple(compute for _ in args), target


# A kernel's functions (T.copy, min, math.exp …), modules and builtin classes (range,
# bool) have no type that Numba's typeof() knows: it tries a function or a module as a
# buffer, for a ``_numba_type_`` and as a cffi function (importing Numba's cffi support),
# a class against exceptions, named tuples, numpy scalars and numba.typed's containers
# (importing numba.typed), raises, and only then finds the registered global. Looked up
# first: the same type without ~500 failed typeof() calls per kernel (50 ms of
# FlashAttention's compile, with the two imports). A value the lookup does not know
# still goes through typeof().
_GLOBALS_ONLY = (pytypes.FunctionType, pytypes.BuiltinFunctionType, pytypes.ModuleType)


def _typed_as_global(val) -> bool:
    """Whether typeof(val) fails (so Numba types ``val`` by its registered global)."""
    if type(val) in _GLOBALS_ONLY:
        return not hasattr(val, "_numba_type_")
    return (type(val) is type and val.__module__ == "builtins"
            and not issubclass(val, (BaseException, tuple)))


def _fits(value: int, ty: types.Integer) -> bool:
    lo, hi = ty.minval, ty.maxval
    return lo <= value <= hi


class TilejitTypingContext(BaseContext):
    def load_additional_registries(self):
        # register the tile language
        from tilejit.codegen.typing import atomics, mma, templates, tiles  # noqa: F401
        from tilejit.codegen.typing import math_intrinsics, random, scalar_math  # noqa: F401
        from tilejit.codegen.typing import async_copies, bit_moves  # noqa: F401
        self.install_registry(templates.registry)

    def init(self):
        super().init()
        self.install_registry(builtin_registry)

    def resolve_value_type(self, val):
        if type(val) is float:
            return weak_float
        if isinstance(val, DType):
            return DTypeType(val)
        if isinstance(val, np.dtype):   # numpy's dtype object: np.dtype("float32")
            try:
                return DTypeType(as_dtype(val))
            except TypeError as e:
                raise TypingError(f"{val} is not a dtype tilejit has: {e}") from None
        if is_torch_dtype(val):         # a global or closure dtype = torch.uint8
            try:
                return DTypeType(as_dtype(val))
            except TypeError as e:
                raise TypingError(f"{val} is not a dtype tilejit has: {e}") from None
        if _typed_as_global(val):
            ty = self._get_global_type(val)
            if ty is not None:
                return ty
        return super().resolve_value_type(val)

    def resolve_function_type(self, func, args, kws):
        key = getattr(func, "typing_key", None)
        if _INPLACE_BITWISE.get(key, key) in BITWISE and not kws:
            sig = _c_bitwise(_INPLACE_BITWISE.get(key, key), tuple(args))
            if sig is not None:
                return sig
            if len(args) == 2 and any(isinstance(a, (types.Float, StorageFloat)) for a in args) \
                    and all(isinstance(a, (types.Number, types.Boolean, StorageFloat))
                            for a in args):
                # (harmonize would compute the integer in the float's type, and Numba list
                # its integer signatures)
                symbol = _BITWISE_SYMBOLS[_INPLACE_BITWISE.get(key, key)]
                raise TypingError(
                    f"`{symbol}` of {' and '.join(_shown(a) for a in args)}: bitwise "
                    f"operations and shifts "
                    f"take integers (or booleans), not floats; convert with T.cast(x, "
                    f"\"int32\") (or T.reinterpret for the float's bits)")
        if key not in NUMERIC_OPS or kws:
            return super().resolve_function_type(func, args, kws)
        folded = _fold_integer_literals(key, args)
        if folded is not None:
            return folded
        if key in _WRAPPING and _unsigned_32(args):
            return signature(types.uint32, *((types.uint32,) * len(args)))
        compute, result = harmonize(tuple(args))
        if result is None:
            if key not in (operator.truediv, operator.itruediv) or not all(
                    isinstance(a, types.Integer) for a in args):
                return super().resolve_function_type(func, args, kws)
            # int / int: float32, or a weak float when both are literals
            result = weak_float if all(_is_weak(a) for a in args) else types.float32
            compute = (types.float64 if result is weak_float else types.float32,) * len(args)
        sig = super().resolve_function_type(func, compute, kws)
        if sig is None or key in _COMPARE or not isinstance(sig.return_type, types.Float):
            return sig
        if isinstance(result, types.Integer):
            return sig
        return signature(result, *sig.args)

    def unify_pairs(self, first, second):
        if isinstance(first, WeakFloat) and isinstance(second, (types.Float, StorageFloat)):
            return types.float32 if isinstance(second, Float4) else second
        if isinstance(second, WeakFloat) and isinstance(first, (types.Float, StorageFloat)):
            return types.float32 if isinstance(first, Float4) else first
        # a bfloat16 / float8 value meeting another type (the branches of
        # T.if_then_else(c, x, 0), a variable assigned both): a literal integer takes its
        # type, a float the wider (harmonize's rule), another integer float32; Numba's
        # own unification asks numpy for a dtype these have not
        if isinstance(first, StorageFloat) or isinstance(second, StorageFloat):
            store, other = (first, second) if isinstance(first, StorageFloat) else \
                (second, first)
            if isinstance(other, (types.IntegerLiteral, types.BooleanLiteral)):
                return store
            if isinstance(other, (types.Float, StorageFloat)):
                wide = widest_float([first, second])
                return types.float32 if isinstance(wide, Float4) else wide
            if isinstance(other, (types.Integer, types.Boolean)):
                return types.float32
        # two integers Numba would meet in float64 (int64 and uint64: the branches of
        # T.if_then_else(c, 3, x + 1) with an unsigned x, a variable assigned both): a
        # literal takes the other's type where it fits (as in arithmetic, harmonize, and
        # TIR; numpy's where in the simulator alike); else float64 stays, as numpy
        # meets them too
        if isinstance(first, types.Integer) and isinstance(second, types.Integer):
            met = super().unify_pairs(first, second)
            if not isinstance(met, types.Float):
                return met
            for lit, other in ((first, second), (second, first)):
                if isinstance(lit, types.IntegerLiteral) and not isinstance(
                        other, types.IntegerLiteral) and _fits(lit.literal_value, other):
                    return other
            return met
        # a float literal meeting an integer (the branches of T.if_then_else, a variable
        # assigned both): float32, as the arithmetic of the two gives (harmonize)
        if {type(first), type(second)} & {WeakFloat} and any(
                isinstance(t, types.Integer) for t in (first, second)):
            return types.float32
        return super().unify_pairs(first, second)


BITWISE = {operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift}
def _shown(ty) -> str:
    return "a float constant" if isinstance(ty, WeakFloat) else str(ty)


_BITWISE_SYMBOLS = {operator.and_: "&", operator.or_: "|", operator.xor: "^",
                    operator.lshift: "<<", operator.rshift: ">>"}
# ``x <<= n`` and the like: typed as their copying operators here (the lowering of an
# in-place operator on a number is the copying operator's)
_INPLACE_BITWISE = {operator.iand: operator.and_, operator.ior: operator.or_,
                    operator.ixor: operator.xor, operator.ilshift: operator.lshift,
                    operator.irshift: operator.rshift}


def _promoted(ty) -> types.Integer:
    """C's integer promotion: narrower than 32 bits computes as int32."""
    ty = types.unliteral(ty)
    return types.int32 if ty.bitwidth < 32 else ty


def _c_bitwise(key, args):
    """Bitwise operations and shifts on typed integers in C's types (TileLang's, whose
    kernels are C++, and the simulator's numpy, where they agree): each operand promoted
    to at least int32, a shift in its left operand's type whatever the count's (a literal
    on the left takes the count's type), ``& | ^`` in the type both share (a literal takes
    the other's type). Numba's rule (64 bits) gives the same values except where a left
    shift passes the type's width: C drops those bits, and the sign-extension idiom
    ``(x << 28) >> 28``
    of int32 helpers relies on it (its count often 64-bit: Numba multiplies int32s in 64
    bits). None where Numba's rules stay: ``& | ^`` of different signedness or width
    (numpy widens those), 64-bit operands (Numba's rule already computes in their type),
    booleans, a literal that does not fit, two literals."""
    if len(args) != 2 or not all(isinstance(a, types.Integer) for a in args):
        return None
    strong = [_promoted(a) for a in args if not _is_weak(a)]
    if not strong:
        return None
    if key in (operator.lshift, operator.rshift) and not _is_weak(args[0]):
        ty = _promoted(args[0])     # C: a shift is in its left operand's type
    elif len(set(strong)) > 1:
        return None
    else:
        ty = strong[0]
    if ty.bitwidth > 32:
        return None         # 64-bit operands: Numba's own rule is already theirs
    if any(isinstance(a, types.IntegerLiteral) and not _fits(a.literal_value, ty)
           for a in args):
        return None
    return signature(ty, ty, ty)


def _fold_integer_literals(key, args):
    if key not in _ARITH or len(args) != 2:
        return None
    if not all(isinstance(a, types.IntegerLiteral) for a in args):
        return None
    a, b = (x.literal_value for x in args)
    if key in (operator.floordiv, operator.mod, operator.ifloordiv, operator.imod) and b == 0:
        return None
    value = _ARITH[key](a, b)
    return signature(types.IntegerLiteral(value), types.int64, types.int64)

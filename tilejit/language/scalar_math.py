"""More of TileLang's scalar math (its TIR operations): trigonometry, exp10 / log10 /
log1p, the hyperbolic and inverse trigonometric functions, atan2 and hypot, rounding,
classification, sign transfer and bit operations.

The simulator's meanings are in ``sim/scalar_math.py``; the GPU code in
``codegen/lowering/trig.py`` (sin, cos, tan) and ``codegen/lowering/scalar_math.py``.
The bit operations on integers are Python's operators in a kernel (the front end
writes ``T.bitwise_and(a, b)`` as ``a & b``, ``T.shift_left(a, n)`` as ``a << n``).
"""
from __future__ import annotations

from tilejit.language._semantics import meaning

# the rounding modes of T.round (TileLang's names)
ROUNDING_MODES = ("ties-to-even", "ties-away-from-zero")


def sin(x):
    """Sine (radians), float32 and the half types (computed in float32): the argument
    reduced exactly (Payne–Hanek for large |x|), within 1 ulp."""
    return meaning("sin")(x)


def cos(x):
    """Cosine (radians); as ``T.sin``."""
    return meaning("cos")(x)


def tan(x):
    """Tangent (radians); as ``T.sin``."""
    return meaning("tan")(x)


def exp10(x):
    """10^x."""
    return meaning("exp10")(x)


def log10(x):
    """Base-10 logarithm."""
    return meaning("log10")(x)


def log1p(x):
    """log(1 + x), accurate for small |x|."""
    return meaning("log1p")(x)


def trunc(x):
    """x rounded toward zero, as a float."""
    return meaning("trunc")(x)


def nearbyint(x):
    """x rounded to the nearest integer, ties to even, as a float."""
    return meaning("nearbyint")(x)


def round(x, rounding_mode="ties-to-even"):  # noqa: A001 - TileLang's name
    """x rounded to the nearest integer, as a float: ties to even (TileLang's default)
    or ``"ties-away-from-zero"`` (C's ``round``)."""
    return meaning("round")(x, rounding_mode)


def sinh(x):
    """Hyperbolic sine (float32 and the half types, computed in float64: within an ulp)."""
    return meaning("sinh")(x)


def cosh(x):
    """Hyperbolic cosine; as ``T.sinh``."""
    return meaning("cosh")(x)


def asin(x):
    """Arcsine, in [−π/2, π/2]; NaN outside [−1, 1]. As ``T.sinh``."""
    return meaning("asin")(x)


def acos(x):
    """Arccosine, in [0, π]; NaN outside [−1, 1]. As ``T.sinh``."""
    return meaning("acos")(x)


def atan(x):
    """Arctangent, in [−π/2, π/2]. As ``T.sinh``."""
    return meaning("atan")(x)


def asinh(x):
    """Inverse hyperbolic sine. As ``T.sinh``."""
    return meaning("asinh")(x)


def acosh(x):
    """Inverse hyperbolic cosine; NaN below 1. As ``T.sinh``."""
    return meaning("acosh")(x)


def atanh(x):
    """Inverse hyperbolic tangent; ±inf at ±1, NaN outside [−1, 1]. As ``T.sinh``."""
    return meaning("atanh")(x)


def atan2(y, x):
    """The angle of the point (x, y), in [−π, π], with C99's special cases (signed zeros
    and infinities). As ``T.sinh``."""
    return meaning("atan2")(y, x)


def hypot(x, y):
    """√(x² + y²) without overflow or underflow in between (inf when either is infinite).
    As ``T.sinh``."""
    return meaning("hypot")(x, y)


def fmod(x, y):
    """The remainder of x / y with the quotient truncated, exact, with x's sign (C's
    fmod); NaN for y = 0 or an infinite x. As ``T.sinh``."""
    return meaning("fmod")(x, y)


def isnan(x):
    """True for a NaN."""
    return meaning("isnan")(x)


def isinf(x):
    """True for +inf or -inf."""
    return meaning("isinf")(x)


def isfinite(x):
    """True for a number that is neither infinite nor NaN."""
    return meaning("isfinite")(x)


def copysign(x, y):
    """|x| with the sign of y."""
    return meaning("copysign")(x, y)


def popcount(x):
    """The number of bits set in an integer."""
    return meaning("popcount")(x)


def clz(x):
    """The number of leading zero bits of an integer (its width for 0)."""
    return meaning("clz")(x)


def bitwise_and(a, b):
    """``a & b``."""
    return a & b


def bitwise_or(a, b):
    """``a | b``."""
    return a | b


def bitwise_xor(a, b):
    """``a ^ b``."""
    return a ^ b


def bitwise_not(a):
    """``~a``."""
    return ~a


def shift_left(a, n):
    """``a << n``."""
    return a << n


def shift_right(a, n):
    """``a >> n`` (arithmetic for signed integers, as C's)."""
    return a >> n


# computed in float64 for float32 (float64 operands refused)
ELEMENTARY = ("sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh")
ELEMENTARY_BINARY = ("atan2", "hypot", "fmod")
FLOAT_UNARY = ("sin", "cos", "tan", "exp10", "log10", "log1p", "trunc", "nearbyint",
               *ELEMENTARY)
CLASSIFY = ("isnan", "isinf", "isfinite")
BIT_COUNTS = ("popcount", "clz")
# the front end's spelling of each bit operation: T.<name>(a, b) -> a <op> b
OPERATORS = {"bitwise_and": "BitAnd", "bitwise_or": "BitOr", "bitwise_xor": "BitXor",
             "shift_left": "LShift", "shift_right": "RShift"}
NAMES = FLOAT_UNARY + CLASSIFY + BIT_COUNTS + ELEMENTARY_BINARY + (
    "round", "copysign", "bitwise_not", *OPERATORS)

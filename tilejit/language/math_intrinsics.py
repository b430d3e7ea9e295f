"""TileLang's ``tilelang.language.math_intrinsics``: arithmetic with an explicit IEEE
rounding mode, and the fast approximate functions of CUDA's ``__expf`` family.

- ``T.ieee_add/ieee_sub/ieee_mul/ieee_fdiv(x, y, rounding_mode="rn")``,
  ``T.ieee_fmaf(x, y, z, rounding_mode)``, ``T.ieee_frcp/ieee_fsqrt(x, rounding_mode)``:
  the exact result rounded once by ``rounding_mode``: ``"rn"`` to nearest (ties to
  even), ``"rz"`` toward zero, ``"ru"`` up, ``"rd"`` down. float32 and float64 take the
  four modes (PTX's ``add.rz.f32``, ``fma.rp.f64``, ...); float16 and bfloat16 only
  ``"rn"``, computed in float32 and rounded to the type, which is the correctly rounded
  result for add, sub, mul, div, rcp and sqrt (float32 carries more than twice their
  precision) and float32's fused multiply-add rounded to the type for fmaf.
- ``T.ieee_frsqrt(x)``: 1/√x computed in float64 (its square root and quotient rounded
  to nearest) and rounded to float32, then to the operand's type; float64 is refused
  (as in TileLang).
- ``T.__exp``, ``__exp10``, ``__log``, ``__log2``, ``__log10``, ``__sin``, ``__cos``,
  ``__tan``, and ``T.fast_rcp`` (1/x): on float32 (and the half types, through float32)
  the special function unit's approximations whatever the kernel's ``fast_math``
  (``ex2.approx``, ``lg2.approx``, ``sin.approx``, ``cos.approx``, ``rcp.approx.ftz``;
  a few ulp, CUDA's ``__expf``);
  float64 computes the accurate function. The simulator computes every one of them
  accurately: the GPU's results are within the approximations' error of it.

The simulator's meanings are in ``sim/math_intrinsics.py``, the GPU's in
``codegen/lowering/math_intrinsics.py``.
"""
from __future__ import annotations

from tilejit.language._semantics import meaning

# TileLang's names of the IEEE rounding modes
IEEE_ROUNDING_MODES = ("rn", "rz", "ru", "rd")
HALF_TYPES = ("float16", "bfloat16")
IEEE_DTYPES = ("float16", "bfloat16", "float32", "float64")
# (name, number of values) of the rounded operations
IEEE_OPS = {"ieee_add": 2, "ieee_sub": 2, "ieee_mul": 2, "ieee_fdiv": 2, "ieee_fmaf": 3,
            "ieee_frcp": 1, "ieee_fsqrt": 1}
FAST_UNARY = ("__exp", "__exp10", "__log", "__log2", "__log10", "__sin", "__cos", "__tan",
              "fast_rcp")


def check_rounding_mode(name: str, rounding_mode) -> str:
    """``rounding_mode`` if it is one of TileLang's, else a ValueError naming it."""
    if rounding_mode not in IEEE_ROUNDING_MODES:
        raise ValueError(f"T.{name}: Invalid rounding mode {rounding_mode!r}; expected one "
                         f"of {', '.join(IEEE_ROUNDING_MODES)}")
    return rounding_mode


def half_mode_message(name: str, dtype: str, rounding_mode: str) -> str:
    return (f"T.{name}: Only rounding mode 'rn' is available for half precision "
            f"({dtype}), got {rounding_mode!r}")


def ieee_add(x, y, rounding_mode="rn"):
    """x + y rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_add", rounding_mode)
    return meaning("ieee_add")(x, y, mode)


def ieee_sub(x, y, rounding_mode="rn"):
    """x − y rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_sub", rounding_mode)
    return meaning("ieee_sub")(x, y, mode)


def ieee_mul(x, y, rounding_mode="rn"):
    """x · y rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_mul", rounding_mode)
    return meaning("ieee_mul")(x, y, mode)


def ieee_fdiv(x, y, rounding_mode="rn"):
    """x / y rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_fdiv", rounding_mode)
    return meaning("ieee_fdiv")(x, y, mode)


def ieee_fmaf(x, y, z, rounding_mode="rn"):
    """x · y + z with one rounding, by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_fmaf", rounding_mode)
    return meaning("ieee_fmaf")(x, y, z, mode)


def ieee_frcp(x, rounding_mode="rn"):
    """1 / x rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_frcp", rounding_mode)
    return meaning("ieee_frcp")(x, mode)


def ieee_fsqrt(x, rounding_mode="rn"):
    """√x rounded by ``rounding_mode``."""
    mode = check_rounding_mode("ieee_fsqrt", rounding_mode)
    return meaning("ieee_fsqrt")(x, mode)


def ieee_frsqrt(x):
    """1/√x (module docstring: computed in float64); float64 operands are refused."""
    return meaning("ieee_frsqrt")(x)


def __exp(x):
    """e^x, fast (``ex2.approx`` of x·log2 e)."""
    return meaning("__exp")(x)


def __exp10(x):
    """10^x, fast."""
    return meaning("__exp10")(x)


def __log(x):
    """Natural logarithm, fast (``lg2.approx`` · ln 2)."""
    return meaning("__log")(x)


def __log2(x):
    """Base-2 logarithm, fast (``lg2.approx``)."""
    return meaning("__log2")(x)


def __log10(x):
    """Base-10 logarithm, fast."""
    return meaning("__log10")(x)


def __sin(x):
    """Sine, fast (``sin.approx``: no argument reduction, best for |x| ≤ π)."""
    return meaning("__sin")(x)


def __cos(x):
    """Cosine, fast (``cos.approx``)."""
    return meaning("__cos")(x)


def __tan(x):
    """Tangent, fast (``sin.approx / cos.approx``)."""
    return meaning("__tan")(x)


def fast_rcp(x):
    """1/x, fast (``rcp.approx.ftz.f32``: about 1 ulp, subnormals flushed to zero)."""
    return meaning("fast_rcp")(x)


NAMES = (*IEEE_OPS, "ieee_frsqrt", *FAST_UNARY)

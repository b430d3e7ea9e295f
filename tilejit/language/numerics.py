"""Numeric semantics shared by the simulator and the language's Python meaning."""
from __future__ import annotations

import numpy as np

from tilejit.language.minmax import FMAX, FMIN

from tilejit.language.dtypes import (DType, bfloat16, float4_e2m1fn, float8_e4m3, float8_e5m2,
                                     float8_e8m0fnu, int8, uint8)


def round_to_bfloat16(x) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept in float32.

    bfloat16 is the upper half of an IEEE binary32: add 0x7FFF plus the lowest kept
    bit, then clear the low 16 bits. NaNs stay NaN (quiet)."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    out = np.where(np.isnan(a), np.float32(np.nan), out)
    return out if isinstance(x, np.ndarray) else np.float32(out)


# the largest finite value of each float dtype (bfloat16's: 0x7F7F)
FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
             "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308,
             "float8_e4m3": 448.0, "float8_e5m2": 57344.0, "float8_e8m0fnu": 2.0 ** 127,
             "float4_e2m1fn": 6.0}
# ... of each 8-bit float, by its dtype
FLOAT8_MAX = {d: FLOAT_MAX[d.name] for d in (float8_e4m3, float8_e5m2, float8_e8m0fnu)}


def finite_range(dtype: DType) -> tuple:
    """(the smallest, the largest) finite value of ``dtype`` (TIR's ``min_value`` and
    ``max_value``): an integer type's range; a float's largest finite magnitude, negated
    for the smallest (float8_e8m0fnu, which has no sign and no zero: 2^-127)."""
    if dtype.name == "bool":
        return False, True
    if dtype.is_float:
        top = FLOAT_MAX[dtype.name]
        return (2.0 ** -127 if dtype.name == "float8_e8m0fnu" else -top), top
    info = np.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def _round_to_e8m0(a: np.ndarray) -> np.ndarray:
    """float32 → float8_e8m0fnu's code, as torch converts: the magnitude's exponent (the
    sign is dropped), one up where the mantissa is past a half (at a half too, but for a
    subnormal: 2^-127 itself stays); the smallest code is 2^-127 (there is no zero); past
    2^127, infinity and NaN are the NaN code 0xFF."""
    bits = np.abs(a).view(np.uint32).astype(np.uint32)
    e, m = bits >> 23, bits & 0x7FFFFF
    up = (m > 0x400000) | ((m == 0x400000) & (e > 0))
    return np.minimum(e + up, 255).astype(np.uint8)


def _e8m0_values(codes) -> np.ndarray:
    codes = np.asarray(codes, dtype=np.uint8)
    with np.errstate(over="ignore"):
        values = np.ldexp(np.float32(1), codes.astype(np.int32) - 127).astype(np.float32)
    return np.where(codes == 255, np.float32(np.nan), values)


def ml_dtype(dtype: DType):
    """ml_dtypes' numpy type of an 8-bit float (its bits are the GPU's)."""
    try:
        import ml_dtypes    # numpy's float8 types, imported where a float8 value is made
    except ImportError:     # pragma: no cover - a dependency of the package
        raise ImportError(f"{dtype.name} in simulation needs the ml_dtypes package "
                          "(pip install ml_dtypes)") from None
    return {float8_e4m3: ml_dtypes.float8_e4m3fn, float8_e5m2: ml_dtypes.float8_e5m2}[dtype]


def round_to_float8(x, dtype: DType) -> np.ndarray:
    """Round values to an 8-bit float (nearest, ties to even), kept in float32, as the
    GPU's conversion does it (``codegen/lowering/scalar._f32_to_f8``). e4m3 has no
    infinity and saturates, as PTX's ``cvt.rn.satfinite`` does: a magnitude beyond 448,
    infinity included, becomes 448 with its sign. e5m2 overflows to infinity, as float16
    does and as torch and ml_dtypes convert. NaN stays NaN."""
    a = np.asarray(x, dtype=np.float32)
    if dtype == float8_e8m0fnu:
        out = _e8m0_values(_round_to_e8m0(np.asarray(a, dtype=np.float32)))
        return out if isinstance(x, np.ndarray) else np.float32(out)
    if dtype == float8_e4m3:
        limit = FLOAT8_MAX[dtype]
        a = np.clip(a, -limit, limit)
    with np.errstate(invalid="ignore", over="ignore"):
        out = a.astype(ml_dtype(dtype)).astype(np.float32)
    return out if isinstance(x, np.ndarray) else np.float32(out)


def from_float8_bits(bits, dtype: DType) -> np.ndarray:
    """The float32 values of 8-bit float codes (a uint8 array)."""
    if dtype == float8_e8m0fnu:
        return _e8m0_values(bits)
    return np.asarray(bits, dtype=np.uint8).view(ml_dtype(dtype)).astype(np.float32)


# float4_e2m1fn's eight magnitudes, by code (the sign is the code's bit 3)
FLOAT4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def float4_codes(x) -> np.ndarray:
    """float32 → float4_e2m1fn codes (uint8, 0…15), as the GPU converts
    (``codegen/lowering/scalar._f32_to_f4``): to nearest, ties to the even code; a
    magnitude past 6, infinity included, saturates to 6 (PTX's ``cvt.rn.satfinite``);
    NaN, which e2m1 has not, becomes +6."""
    a = np.asarray(x, dtype=np.float32)
    mag = np.abs(a)
    # the midpoints between neighbouring magnitudes, and whether a tie goes up (to the
    # even code: codes 1, 3, 5 are odd)
    mids = (FLOAT4_VALUES[:-1] + FLOAT4_VALUES[1:]) / 2
    code = np.searchsorted(mids, mag, side="left")          # ties go down …
    tie = np.isin(mag, mids) & (code % 2 == 1)               # … unless that code is odd
    code = np.where(tie, code + 1, code)
    code = np.where(np.isnan(a), 7, np.minimum(code, 7)).astype(np.uint8)
    negative = np.signbit(a) & ~np.isnan(a)
    return (code | (negative.astype(np.uint8) << 3)).astype(np.uint8)


def packed_values(codes, dtype: DType) -> np.ndarray:
    """The values of a packed tensor's 4-bit codes (uint8, 0…15): float4_e2m1fn's as
    float32, int4's two's complement as int8, uint4's as uint8."""
    if dtype.kind == "uint":
        return np.asarray(codes, np.uint8) & np.uint8(0xF)
    if dtype.name == "int4":
        return ((np.asarray(codes, np.uint8).astype(np.int8) ^ 8) - 8).astype(np.int8)
    return from_float4_codes(codes)


def packed_codes(values, dtype: DType) -> np.ndarray:
    """The 4-bit codes (uint8, 0…15) a packed tensor stores for ``values``."""
    if dtype.is_packed_int:
        return (np.asarray(cast(np.asarray(values), dtype)) & 0xF).astype(np.uint8)
    return float4_codes(values)


def from_float4_codes(codes) -> np.ndarray:
    """The float32 values of float4_e2m1fn codes (signed zeros kept)."""
    codes = np.asarray(codes, dtype=np.uint8)
    mag = FLOAT4_VALUES[codes & 7]
    return np.where(codes & 8, -mag, mag).astype(np.float32)


# TileLang's T.cast rounding modes (its tilelang.language.tir.ir's): "" and "rn" round to
# nearest even; "rz", "rp", "rm" are reserved there (its CUDA backend rounds to nearest);
# "rs" is stochastic rounding with random bits (rbits=)
CAST_ROUNDING_MODES = frozenset(("", "rn", "rz", "rp", "rm", "rs"))


def cast_options_problem(round, sat, rbits) -> str | None:  # noqa: A002
    """What is wrong with ``T.cast``'s ``round=``, ``sat=``, ``rbits=`` (TileLang's
    checks, in its words), or what tilejit does not have (stochastic rounding), or None.
    ``"rz"``, ``"rp"``, ``"rm"`` pass: TileLang reserves them and rounds to nearest, as
    tilejit does (``cast_mode_warning`` says so)."""
    if round not in CAST_ROUNDING_MODES:
        return (f"T.cast: Invalid round {round!r}. Must be one of: "
                f"{sorted(CAST_ROUNDING_MODES)}")
    if not isinstance(sat, (bool, np.bool_)):
        return (f"T.cast: Invalid sat {sat!r}. Must be a bool (True for satfinite, False "
                f"for no saturation), got {type(sat).__name__}")
    if round == "rs" and rbits is None:
        return "T.cast: rbits is required when round='rs' (stochastic rounding)"
    if round != "rs" and rbits is not None:
        return "T.cast: rbits is only valid with round='rs' (stochastic rounding)"
    if round == "rs":
        return ("T.cast(round='rs', rbits=...) (stochastic rounding) is not supported by "
                "tilejit: its conversions round to nearest even")
    return None


def cast_mode_warning(round) -> str | None:  # noqa: A002
    """The warning for a rounding mode TileLang reserves, or None."""
    if round in ("rz", "rp", "rm"):
        return (f"T.cast(round={round!r}): TileLang reserves this mode and its CUDA backend "
                f"rounds to nearest even; so does tilejit")
    return None


def cast(value, dtype: DType):
    if dtype.is_packed_int:         # as a byte, then the low four bits (int4: signed)
        if dtype.kind == "uint":
            out = cast(value, uint8) & np.uint8(0xF)
            return out if isinstance(value, np.ndarray) else out[()]
        low = cast(value, int8) & np.int8(0xF)
        out = (low ^ np.int8(8)) - np.int8(8)
        return out if isinstance(value, np.ndarray) else out[()]
    if dtype == float4_e2m1fn:
        out = from_float4_codes(float4_codes(np.asarray(value).astype(np.float32)))
        return out if isinstance(value, np.ndarray) else out[()]
    if dtype == bfloat16:
        return round_to_bfloat16(np.asarray(value).astype(np.float32))
    if dtype in FLOAT8_MAX:
        return round_to_float8(np.asarray(value).astype(np.float32), dtype)
    target = dtype.numpy
    arr = np.asarray(value)
    if dtype.is_int and arr.dtype.kind == "f":
        out = _float_to_int(arr, np.dtype(target))
        return out if isinstance(value, np.ndarray) else out[()]
    with np.errstate(invalid="ignore", over="ignore"):
        out = arr.astype(target)
    return out if isinstance(value, np.ndarray) else out[()]


def _float_to_int(arr, target: np.dtype):
    """A float toward zero as the GPU converts it (PTX ``cvt.rzi``): NaN is 0 and a value
    out of range saturates, to the type's range for 32 and 64 bits, to the 16-bit one
    for 8 and 16 bits (those go through a 16-bit register), whose low bits are kept."""
    info = np.iinfo(target)
    wide = target.itemsize >= 4
    lo, hi = (info.min, info.max) if wide else ((-32768, 32767) if info.min < 0
                                                else (0, 65535))
    x = np.trunc(arr.astype(np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        safe = np.where(np.isnan(x) | (x < lo) | (x >= float(hi) + 1.0), 0, x)
        out = safe.astype(np.int64 if info.min < 0 else np.uint64)
    out = np.where(x < lo, lo, np.where(x >= float(hi) + 1.0, hi, out))
    out = np.where(np.isnan(x), 0, out)
    return out.astype(np.int64 if info.min < 0 else np.uint64).astype(target)


def reinterpret(value, dtype: DType):
    """The bits of a typed value (a numpy scalar or array) as ``dtype``, of the same width
    (an integer wider than ``dtype`` cut to its low bits first)."""
    if dtype.packed > 1:
        raise TypeError(f"T.reinterpret: as {dtype.name}: {dtype.with_article} value is four "
                        f"bits, which no integer is (not supported)")
    arr = np.asarray(value)
    if isinstance(value, (np.ndarray, np.generic)) and arr.dtype.kind in "iu" and \
            arr.dtype.itemsize > dtype.itemsize:
        # a wider integer (a kernel's integer arithmetic runs in 64 bits where TileLang's
        # stays in 32): its low bits, as the narrower arithmetic would have left them
        arr = arr.astype(f"uint{dtype.itemsize * 8}")
        value = arr if isinstance(value, np.ndarray) else arr[()]
    if dtype == bfloat16 or dtype in FLOAT8_MAX:
        # held in float32 here: an integer of the width gives its bits' value; the
        # simulator cannot tell such a value from a float32 to take its bits back
        if arr.dtype.kind not in "iu" or arr.dtype.itemsize != dtype.itemsize:
            raise TypeError(f"T.reinterpret: to {dtype.name} takes an integer of "
                            f"{dtype.itemsize * 8} bits, got {arr.dtype}")
        bits = arr.astype(np.uint8 if dtype.itemsize == 1 else np.uint16)
        if dtype == bfloat16:
            out = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            out = from_float8_bits(bits, dtype)
        return out if isinstance(value, np.ndarray) else out[()]
    if not isinstance(value, (np.ndarray, np.generic)) or arr.dtype.kind not in "iuf":
        raise TypeError(f"T.reinterpret: expected a typed value (an element, or a "
                        f"T.cast), got {value!r}")
    if arr.dtype.itemsize != dtype.itemsize:
        raise TypeError(f"T.reinterpret: {arr.dtype} ({arr.dtype.itemsize * 8} bits) as "
                        f"{dtype.name} ({dtype.itemsize * 8} bits): the widths differ")
    # (np.ascontiguousarray gives a 0-d array one dimension: the shape is put back)
    out = np.ascontiguousarray(arr).view(dtype.numpy).reshape(arr.shape)
    return out if isinstance(value, np.ndarray) else out[()]


def select(cond, a, b):
    if isinstance(cond, (bool, np.bool_)) and np.ndim(a) == 0 and np.ndim(b) == 0:
        return a if cond else b
    return np.where(cond, a, b)


def _is_float(x) -> bool:
    return isinstance(x, float) or np.asarray(x).dtype.kind == "f"


def wide_literal(a, b):
    """A Python int beside a numpy integer whose type it does not fit (``T.max(-4, x)``
    of a uint8 x): an int64 (uint64 past int64's range), as the compiler's typing widens
    the two (``typing/templates._common``), where numpy raises OverflowError."""
    def wide(v, other):
        if type(v) is not int or not isinstance(other, (np.ndarray, np.generic)) or \
                other.dtype.kind not in "iu":
            return v
        info = np.iinfo(other.dtype)
        if info.min <= v <= info.max:
            return v
        return np.uint64(v) if v > np.iinfo(np.int64).max else np.int64(v)
    return wide(a, b), wide(b, a)


def maximum(a, b):
    """The larger: of floats, PTX ``max``'s (a NaN loses, +0 above −0)."""
    if _is_float(a) or _is_float(b):
        return FMAX(a, b)
    return np.maximum(*wide_literal(a, b))


def minimum(a, b):
    """The smaller: of floats, PTX ``min``'s (a NaN loses, −0 below +0)."""
    if _is_float(a) or _is_float(b):
        return FMIN(a, b)
    return np.minimum(*wide_literal(a, b))

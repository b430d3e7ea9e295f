"""Numba types for kernel values.

- ``GlobalTensorType``: a global-memory tensor argument (data pointer, run-time shape
  and strides in elements; the innermost stride is the constant 1 in the specialization
  for tensors whose last dimension is contiguous).
- ``WeakFloat`` / weak ints: Python number literals and run-time Python scalars, which
  take the dtype of the typed value they meet (``x * 2.0`` on float16 stays float16).
- ``StorageFloat``: ``BFloat16`` (16 bits) and ``Float8`` (e4m3, e5m2: 8 bits), stored as
  their bits, computed in float32.
- ``DTypeType``: a compile-time dtype (``A.dtype``, ``T.float32``).
- ``ParallelType``: ``T.Parallel(m, n)``, an iterable whose iterations the block's
  threads share.
"""
from __future__ import annotations

from numba.core import types
from numba.core.typeconv import Conversion

from tilejit.language.dtypes import DType


class WeakFloat(types.Float):
    """A Python float: float64-valued, but yields to the dtype of a typed operand."""

    def __init__(self):
        types.Number.__init__(self, "weak_float")
        self.bitwidth = 64

    def cast_python_value(self, value):
        return float(value)

    def can_convert_to(self, typingctx, other):
        if isinstance(other, (types.Float, StorageFloat)):
            return Conversion.promote
        return None

    def unify(self, typingctx, other):
        if isinstance(other, (types.Float, StorageFloat)) and not isinstance(other, WeakFloat):
            return other
        return None


weak_float = WeakFloat()


class StorageFloat(types.Number):
    """A float type LLVM has no arithmetic for: held as its bits (an integer of
    ``bitwidth``), converted to float32 to compute and rounded back
    (``codegen/lowering/scalar.to_f32`` / ``from_f32``)."""

    def __init__(self, name, bitwidth):
        super().__init__(name)
        self.bitwidth = bitwidth

    def can_convert_to(self, typingctx, other):
        if isinstance(other, types.Float) and other.bitwidth >= 32:
            return Conversion.safe
        if isinstance(other, (types.Number,)):
            return Conversion.unsafe
        return None

    def unify(self, typingctx, other):
        if isinstance(other, WeakFloat):
            return self
        if isinstance(other, types.Float):
            return other if other.bitwidth >= 32 else types.float32
        if isinstance(other, StorageFloat):     # bf16 with fp8, e4m3 with e5m2
            return types.float32
        return None


class BFloat16(StorageFloat):
    """bfloat16: the upper 16 bits of an IEEE binary32."""

    def __init__(self):
        super().__init__("bfloat16", 16)


class Float8(StorageFloat):
    """float8_e4m3 (no infinities, largest 448) and float8_e5m2 (the upper byte of a
    float16): 8 bits."""

    def __init__(self, name):
        super().__init__(name, 8)


class Float4(StorageFloat):
    """float4_e2m1fn: a 4-bit code in the low bits of a byte (a tensor holds two a byte:
    ``codegen/lowering/tensor.py`` reads and writes its half)."""

    def __init__(self):
        super().__init__("float4_e2m1fn", 8)

    def unify(self, typingctx, other):
        # no arithmetic is done in 4 bits (CUDA's __nv_fp4_e2m1 has none): a float
        # literal meeting a float4 value computes in float32, as the simulator does,
        # not rounded back to the eight values of the format
        if isinstance(other, WeakFloat):
            return types.float32
        return super().unify(typingctx, other)


bfloat16 = BFloat16()
float4_e2m1fn = Float4()
float8_e4m3 = Float8("float8_e4m3")
float8_e5m2 = Float8("float8_e5m2")
float8_e8m0fnu = Float8("float8_e8m0fnu")     # an exponent only (MX scales)

_NUMBA_OF = {
    "float16": types.float16, "bfloat16": bfloat16, "float32": types.float32,
    "float64": types.float64, "int8": types.int8, "int16": types.int16,
    "int32": types.int32, "int64": types.int64, "uint8": types.uint8,
    "uint16": types.uint16, "uint32": types.uint32, "uint64": types.uint64,
    "bool": types.boolean, "float8_e4m3": float8_e4m3, "float8_e5m2": float8_e5m2,
    "float8_e8m0fnu": float8_e8m0fnu, "float4_e2m1fn": float4_e2m1fn,
    "int4": types.int8,     # an element read from an int4 tensor: its value, in a byte
    "uint4": types.uint8,
}


NUMBA_OF = _NUMBA_OF     # dtype name -> Numba type


def numba_type(dtype: DType) -> types.Type:
    return _NUMBA_OF[dtype.name]


def is_half(ty) -> bool:
    """float16, bfloat16 and float8: arithmetic on them is carried out in float32."""
    return ty == types.float16 or isinstance(ty, StorageFloat)


class DTypeType(types.Callable, types.Dummy):
    """A compile-time dtype value."""

    def __init__(self, dtype: DType):
        # the dtype it names: TileLang's spelling float8_e4m3fn is float8_e4m3
        from tilejit.language.dtypes import as_dtype
        self.dtype = dtype = as_dtype(dtype)
        super().__init__(f"DType[{dtype.name}]")

    @property
    def key(self):
        return self.dtype.name

    def get_call_type(self, context, args, kws):
        """``T.float32(x)``: a typed constant or conversion, as ``T.cast(x, T.float32)``."""
        from numba.core.typing import signature
        if kws or len(args) != 1 or not isinstance(args[0], (types.Number, types.Boolean)):
            return None
        return signature(numba_type(self.dtype), args[0])

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return type(self)


class GlobalTensorType(types.Type):
    """A tensor in global memory, passed as a kernel argument. ``static_shape``: the
    shape entries the specialization fixed (``Specialization.shape_constants``), None
    per unknown entry; None when none is known. The lowering reads them to leave out
    code a known shape makes dead (a copy's per-element tail path, ``lowering/copy.py``);
    the values it computes with are still the struct's, which the entry fills with the
    same constants (``entry.tensor_value``)."""

    def __init__(self, dtype: DType, ndim: int, contiguous: bool = False,
                 aligned: bool = False, static_shape: tuple | None = None):
        self.dtype = dtype
        self.ndim = ndim
        self.contiguous = contiguous   # stride[-1] == 1, known at compile time
        self.aligned = aligned         # data pointer 16-byte aligned
        if static_shape is not None and all(n is None for n in static_shape):
            static_shape = None
        self.static_shape = None if static_shape is None else tuple(static_shape)
        self.element = numba_type(dtype)
        flags = ("C" if contiguous else "A") + ("16" if aligned else "")
        known = "" if self.static_shape is None else ", " + "x".join(
            "?" if n is None else str(n) for n in self.static_shape)
        super().__init__(f"GlobalTensor({dtype.name}, {ndim}d, {flags}{known})")

    @property
    def key(self):
        return (self.dtype.name, self.ndim, self.contiguous, self.aligned, self.static_shape)

    def unify(self, typingctx, other):
        """Two tensors that differ only in what is known of their shapes (one variable
        bound to either): the entries both know alike."""
        if isinstance(other, GlobalTensorType) and (
                other.dtype, other.ndim, other.contiguous, other.aligned) == (
                self.dtype, self.ndim, self.contiguous, self.aligned):
            mine = self.static_shape or (None,) * self.ndim
            theirs = other.static_shape or (None,) * other.ndim
            return GlobalTensorType(self.dtype, self.ndim, self.contiguous, self.aligned,
                                    tuple(a if a == b else None for a, b in zip(mine, theirs)))
        return None

    @property
    def pointer(self):
        return types.CPointer(self.element, addrspace=1)


class TensorMapType(types.Opaque):
    """A TMA tensor map: the address of a hidden 128-byte kernel parameter
    (``passes/tma.py``, ``targets/nvptx.build_entry``)."""

    def __init__(self):
        super().__init__("TensorMap")


tensor_map = TensorMapType()


class ParallelType(types.SimpleIterableType):
    """``T.Parallel(*extents)`` with compile-time extents (kind "parallel"), or one of
    the loops the parallel-guard pass builds from it: this thread's vector groups
    ("groups", yielding each group's first flat index), and the lanes of a group
    ("lanes": 0 … vec-1; "ends": 0 and vec-1)."""

    def __init__(self, extents: tuple[int, ...], kind: str = "parallel"):
        self.extents = extents
        self.kind = kind
        if kind == "parallel" and len(extents) > 1:
            yield_type = types.UniTuple(types.int32, len(extents))
        else:
            yield_type = types.int32
        super().__init__(f"Parallel{extents}.{kind}",
                         ParallelIterType(extents, yield_type, kind))

    @property
    def key(self):
        return (self.extents, self.kind)


class ParallelIterType(types.SimpleIteratorType):
    def __init__(self, extents, yield_type, kind="parallel"):
        self.extents = extents
        self.kind = kind
        super().__init__(f"ParallelIter{extents}.{kind}", yield_type)

    @property
    def key(self):
        return (self.extents, self.kind)

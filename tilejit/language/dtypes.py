"""Element types of tensors and tiles.

A ``DType`` is a compile-time value: ``A.dtype`` of a kernel argument, ``T.float16``
and the dtype strings the seeds use (``"float16"``) all name one of these.
"""
from __future__ import annotations

import re

import numpy as np

from tilejit.language.compat import TILELANG_ATTRIBUTES, missing_attribute, not_in_module

_DATATYPE_NAMES = TILELANG_ATTRIBUTES["DataType"]


class DType(str):
    """An element type. As in TileLang, a dtype is its name as a ``str``:
    ``T.float16 == "float16"``, ``getattr(torch, T.float16)``, dicts keyed by dtype names
    and dtype names in ``pytest.mark.parametrize`` all work; ``bits``, ``kind``,
    ``itemsize`` and ``as_torch()`` say more. Immutable, like the string it is.

    ``T.dtype`` is this class, as TileLang's ``T.dtype`` is its dtype class: called with
    one value (``T.dtype("float16")``, ``T.dtype(torch.float16)``, ``T.dtype(np.int8)``)
    it returns that dtype (``as_dtype``), ``isinstance(x, T.dtype)`` tells a dtype, and
    ``dtype: T.dtype = T.float16`` annotates a parameter."""

    def __new__(cls, name, bits: int | None = None, kind: str | None = None,
                lanes: int = 1, held: bool = True):
        # kind: "float", "int", "uint", "bool"; held: a tensor or tile may hold it (a
        # dtype TileLang has that tilejit only names is not: NOT_HELD)
        if bits is None and kind is None:
            if isinstance(name, str) and not isinstance(name, DType) and (
                    (_SUB_BYTE_INT.match(name) and name not in _BY_NAME) or name in NOT_HELD):
                return not_held(name)   # a name, as T.uint4 is: holding it says why not
            found = as_dtype(name)
            # TileLang's spelling of it (torch's): the dtype that keeps that name
            spelled = str(name).rsplit(".", 1)[-1]
            return float8_e4m3fn if spelled == "float8_e4m3fn" else found
        self = super().__new__(cls, name)
        object.__setattr__(self, "_fields", (bits, kind, lanes, held))
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"{self!r} is immutable")

    def __getattr__(self, name):
        if name not in _DATATYPE_NAMES:     # (a probe, numpy's `dtype`: at once)
            raise AttributeError(name)
        raise missing_attribute(self, name, "DataType", "a part of TVM's DataType (TileLang's "
                                "dtype class) that tilejit's does not have")

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def with_article(self) -> str:
        """Its name after its article, for messages: "an int4", "a float16"."""
        return f"{'an' if self.name[0] in 'aeio' else 'a'} {self.name}"    # a uint8

    @property
    def bits(self) -> int:
        return self._fields[0]

    @property
    def kind(self) -> str:
        return self._fields[1]

    @property
    def lanes(self) -> int:
        """Values per element: 1, or N of TileLang's vector dtypes (``float32x4``)."""
        return self._fields[2]

    @property
    def held(self) -> bool:
        """Whether a tensor or tile may hold it (``NOT_HELD``: TileLang's dtypes that
        tilejit names only)."""
        return self._fields[3]

    def is_float4(self) -> bool:
        """TileLang's ``dtype.is_float4()``: one of the 4-bit e2m1 floats."""
        return self.name.startswith(("float4_e2m1fn", "float4_e2m1_unpacked"))

    def is_float4_e2m1fn(self) -> bool:
        return self.name == "float4_e2m1fn"

    def is_float4_e2m1_unpacked(self) -> bool:
        return self.name == "float4_e2m1_unpacked"

    def __reduce__(self):
        return (as_dtype, (self.name,))

    # float8_e4m3 and TileLang's (torch's) spelling float8_e4m3fn are one dtype: equal,
    # also to the other's name; each hashes as its own name (a dict keyed by either
    # spelling finds it by that spelling)
    def __eq__(self, other):
        same = str.__eq__(self, other)      # True, False, or NotImplemented (not a str)
        if same is False and str.__str__(self) in _SPELLINGS:
            return str.__str__(other) in _SPELLINGS
        return same

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def as_torch(self):
        """The torch dtype (TileLang's ``T.float16.as_torch()``)."""
        import torch    # only for a caller that asks for a torch dtype
        return getattr(torch, _TORCH_NAMES.get(self.name, self.name))

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def packed(self) -> int:
        """Elements a byte holds: 2 for float4_e2m1fn and int4 (a tensor of either is
        bytes), else 1."""
        return max(1, 8 // self.bits)

    @property
    def is_packed_int(self) -> bool:
        """int4 or uint4: integers a tensor holds two a byte (read on every simulated
        cast: two field reads)."""
        bits, kind = self._fields[0], self._fields[1]
        return bits < 8 and kind in ("int", "uint")

    @property
    def in_tiles(self) -> DType:
        """The dtype a tile of this dtype holds: int4's values one a byte, as int8, and
        uint4's as uint8 (a tile's elements are addressed one by one, by threads and
        tensor-core operand loads alike); itself for every other dtype."""
        if self.is_packed_int:
            return int8 if self.kind == "int" else uint8
        return self

    @property
    def bytes(self) -> int:
        """Bytes per element (TileLang's ``dtype.bytes``)."""
        return self.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def held_in_float32(self) -> bool:
        """bfloat16 and the float8 types, which numpy lacks: the simulator holds them in
        float32, rounded to the type on every store (``numerics.cast``)."""
        return self.name in _HELD_IN_FLOAT32

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype used to hold values in simulation (``held_in_float32`` types
        in float32)."""
        if self.held_in_float32:
            return np.dtype(np.float32)
        if self.is_packed_int:          # its values, one a byte
            return np.dtype(np.int8 if self.kind == "int" else np.uint8)
        return np.dtype(self.name if self.name != "bool" else np.bool_)

    def __repr__(self) -> str:
        return f"T.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __call__(self, value=0):
        """``T.float32(1.0)``: a typed constant (simulation semantics: numpy scalar);
        ``T.int32()``, TileLang's declaration of a variable of the dtype, is its zero (as
        ``v = T.int32()`` is in a kernel until it is bound). A dtype the simulator holds in
        float32 (bfloat16, the float8s, float4_e2m1fn) rounds the value to itself, as the
        GPU's constant is."""
        if self.held_in_float32:
            from tilejit.language.numerics import cast     # numerics imports this module
            return np.float32(cast(np.float32(value), as_dtype(self)))
        return self.numpy.type(value)


float16 = DType("float16", 16, "float")
bfloat16 = DType("bfloat16", 16, "float")
float32 = DType("float32", 32, "float")
float64 = DType("float64", 64, "float")
int8 = DType("int8", 8, "int")
int16 = DType("int16", 16, "int")
int32 = DType("int32", 32, "int")
int64 = DType("int64", 64, "int")
uint8 = DType("uint8", 8, "uint")
uint16 = DType("uint16", 16, "uint")
uint32 = DType("uint32", 32, "uint")
uint64 = DType("uint64", 64, "uint")
bool_ = DType("bool", 8, "bool")
# the OCP 8-bit floats of Hopper's tensor cores: e4m3 without infinities, its one NaN
# pattern S.1111.111, largest finite 448 (torch's and ml_dtypes' float8_e4m3fn); e5m2 with
# IEEE infinities and NaNs, largest finite 57344
float8_e4m3 = DType("float8_e4m3", 8, "float")
float8_e5m2 = DType("float8_e5m2", 8, "float")
FLOAT8 = (float8_e4m3, float8_e5m2)
# OCP MX's scale: 8 exponent bits, no sign, no mantissa: 2^(e - 127), 0xFF NaN, no zero
# (torch's float8_e8m0fnu; a storage dtype: tilejit's gemms do not take it)
float8_e8m0fnu = DType("float8_e8m0fnu", 8, "float")
# OCP MX's 4-bit float e2m1: a sign, 2 exponent bits (bias 1) and a mantissa bit:
# ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no infinity, no NaN. A tensor holds it two a byte, element
# 2k in the low four bits (torch's float4_e2m1fn_x2; TileLang's packed float4_e2m1fn); no
# tile holds it (``packed``)
float4_e2m1fn = DType("float4_e2m1fn", 4, "float")
# 4-bit two's-complement integers, -8 … 7 (TileLang's T.int4). A tensor holds them two a
# byte, element 2k in the low four bits, in an int8 or uint8 torch tensor (TileLang's
# storage of them); a tile holds them one a byte, as int8 (``DType.in_tiles``), which
# T.gemm multiplies on int8 tensor cores
int4 = DType("int4", 4, "int")
# 4-bit unsigned integers, 0 … 15 (TVM's and TileLang's "uint4"; GPTQ's and AWQ's weights):
# as int4, but zero-extended; a tile holds them as uint8
uint4 = DType("uint4", 4, "uint")
_HELD_IN_FLOAT32 = frozenset(("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
                              "float8_e8m0fnu", "float4_e2m1fn"))
# the two names of one dtype (float8_e4m3fn is TileLang's and torch's spelling of ours)
_SPELLINGS = frozenset(("float8_e4m3", "float8_e4m3fn"))
# torch's (and ml_dtypes') names where they differ from ours
_TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn", "float4_e2m1fn": "float4_e2m1fn_x2",
                "float4_e2m1fnx2": "float4_e2m1fn_x2"}

ALL_DTYPES = (float16, bfloat16, float32, float64, int8, int16, int32, int64,
              uint8, uint16, uint32, uint64, bool_, float8_e4m3, float8_e5m2, float8_e8m0fnu)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "bf16": bfloat16,
                 "fp16": float16, "fp32": float32, "fp64": float64,
                 "short": int16, "int": int32, "long": int64, "uint": uint32,
                 # TileLang's tfloat32 is float32 storage whose gemm runs on tf32 tensor
                 # cores; tilejit's float32 gemm already does (mma.sync .tf32, operands
                 # rounded to nearest), so tfloat32 is float32
                 "tfloat32": float32, "custom[tfloat32]": float32,
                 "float8_e4m3fn": float8_e4m3, "e4m3": float8_e4m3, "e5m2": float8_e5m2,
                 "e8m0": float8_e8m0fnu,
                 # torch's dtype of two e2m1 floats a byte: a tensor of it holds float4_e2m1fn
                 "float4_e2m1fn": float4_e2m1fn, "float4_e2m1fn_x2": float4_e2m1fn,
                 "int4": int4, "uint4": uint4})

# TileLang's float8_e4m3fn (torch's name), a str equal to "float8_e4m3fn" so that
# ``getattr(torch, T.float8_e4m3fn)`` works, which ``as_dtype`` reads as float8_e4m3
float8_e4m3fn = DType("float8_e4m3fn", 8, "float")
# TileLang's dtypes that tilejit names but no tensor or tile holds: its programs compare
# dtypes with them, give them as defaults and list them in ``pytest.mark.parametrize``,
# so reading one (``T.float4_e2m1fn``) is a DType; holding one (``T.Tensor(shape,
# T.float4_e2m1fn)``, ``T.alloc_local((1,), T.float32x4)``) is a TypeError naming it
# (``as_dtype``). ``not_held(name)`` makes them; the names are TileLang's (compat.py).
NOT_HELD: dict = {}
_NARROW = re.compile(r"^(u?int|float|bfloat|tfloat)(\d+)((?:_[a-z0-9]+)*)$")
_LANES = re.compile(r"^(.+?)x(\d+)$")
_SUB_BYTE_INT = re.compile(r"^u?int[124]$")


def not_held(name: str) -> DType | None:
    """The named-only DType of one of TileLang's dtype names that tilejit does not hold
    (a vector ``float32x4``, a narrow float ``float4_e2m1fn``, ``int4``), or None."""
    if name in NOT_HELD:
        return NOT_HELD[name]
    lanes, base = 1, name
    m = _LANES.match(name)
    if m is not None and _NARROW.match(m.group(1)):
        base, lanes = m.group(1), int(m.group(2))
    m = _NARROW.match(base)
    if m is None or name in _BY_NAME:
        return None
    family, width = m.group(1), int(m.group(2))
    bits = 8 if base == "float4_e2m1_unpacked" else width
    kind = {"bfloat": "float", "tfloat": "float"}.get(family, family)
    found = NOT_HELD[name] = DType(name, bits, kind, lanes, held=False)  # bits per lane
    return found


def _not_held_message(d: DType) -> str:
    if d.kind in ("int", "uint") and d.bits < 8 and d.lanes == 1:
        return (f"{d.name} ({d.bits}-bit {'un' if d.kind == 'uint' else ''}signed integers) "
                f"is a dtype name tilejit has but no tensor or tile can hold: pack "
                f"{8 // d.bits} values a byte in a uint8/int8 tensor and unpack them "
                f"(shifts and masks)")
    if d.lanes > 1:
        return (f"{d.name} (a vector of {d.lanes} values) is a dtype name tilejit has but no "
                f"tensor or tile can hold: tilejit's tiles hold scalars (give the tile "
                f"{d.lanes} times the elements)")
    return (f"{d.name} is a dtype name tilejit has but no tensor or tile can hold (its "
            f"dtypes are float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2, "
            f"float8_e8m0fnu, (u)int8 to (u)int64 and bool): hold the bits in a uint8 tensor "
            f"and decode them")


# TileLang's T.ptr: an address. As a parameter annotation, a pointer argument (a tensor,
# whose data pointer is passed, or an address); as a dtype (a table of pointers,
# ``T.Tensor([G], T.ptr)``), int64, which it equals
ptr = DType("int64", 64, "int")

# TileLang's other names of these dtypes
half, double, short, long, uint = float16, float64, int16, int64, uint32
tfloat32 = float32
# and those that are Python builtins' names too: ``T.bool``, ``T.float``, ``T.int``
# (``tilejit.language`` gives them through its module ``__getattr__``, so the module's
# own code still sees Python's ``bool``, ``float`` and ``int``)
BUILTIN_NAMED = {"bool": bool_, "float": float32, "int": int32}


def as_dtype(value) -> DType:
    """A DType from a DType, a dtype name, a numpy dtype or a torch dtype."""
    if value is ptr:
        return int64
    if isinstance(value, DType):
        if not value.held:
            raise TypeError(_not_held_message(value))
        # TileLang's spelling float8_e4m3fn: the dtype it names
        return value if value is not float8_e4m3fn else float8_e4m3
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            from tilejit.language.compat import dtype_names   # the error path only
            # (TVM's integers of 1, 2 and 4 bits, which TileLang's DataType parses)
            named = not_held(value) if value in dtype_names() or _SUB_BYTE_INT.match(
                value) else None
            if named is not None:
                raise TypeError(_not_held_message(named)) from None
            raise TypeError(f"unknown dtype {value!r}; expected one of "
                            f"{', '.join(d.name for d in ALL_DTYPES)}") from None
    try:
        return _OF_OBJECT[value]            # a torch or numpy dtype seen before
    except (KeyError, TypeError):
        pass
    found = _from_object(value)
    try:
        _OF_OBJECT[value] = found
    except TypeError:                       # unhashable: not kept
        pass
    return found


_OF_OBJECT: dict = {}       # torch / numpy dtype objects -> DType (a launch asks per tensor)


def is_torch_dtype(value) -> bool:
    """Whether ``value`` is a torch dtype (``torch.float16``), without importing torch."""
    return type(value).__module__ == "torch" and type(value).__name__ == "dtype"


def _from_object(value) -> DType:
    if value is None:       # (numpy reads None as float64: no dtype was named)
        raise TypeError("expected a dtype (a name such as 'float16', T.float16, a torch "
                        "or numpy dtype), got None")
    name = str(value)
    if name.startswith("torch."):
        name = name[len("torch."):]
        if name == "bool":
            return bool_
        return as_dtype(name)
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot interpret {value!r} as a dtype") from None
    if npd == np.bool_:
        return bool_
    return as_dtype(npd.name)


# TileLang's name of its dtype class (``from tilelang.language.dtypes import dtype``)
dtype = DType


def packed_view_message(what: str, name: str, dtype: DType, to: DType) -> str:
    """The error of a view of a packed tensor (float4_e2m1fn, int4) as another dtype, on
    both targets: its elements are half bytes, which no other dtype's view addresses."""
    return (f"{what}: a view of {name} ({dtype.with_article} tensor, two elements a byte) "
            f"as {to.name} is not supported; declare the parameter as its bytes "
            f"(`T.Tensor((..., n // 2), T.uint8)`) and take the halves apart (x & 15, x >> 4)")


def resolve_torch_storage_dtype(value) -> DType:
    """TileLang's ``resolve_torch_storage_dtype``: the dtype of the torch tensor that
    stores ``value``'s elements: itself for a dtype tilejit holds; ``int8`` for ``int4``;
    ``float4_e2m1fnx2`` for the e2m1 floats where torch has ``float4_e2m1fn_x2``, else
    ``int8``."""
    name = str(value)
    named = value if isinstance(value, DType) else _BY_NAME.get(name) if name in (
        "float4_e2m1fn", "float4_e2m1fn_x2", "int4", "uint4") else not_held(name)
    if named is None or named.held and not named.packed > 1:
        return as_dtype(value)
    if named.is_float4():
        import torch    # only for a caller that asks about torch's storage
        return not_held("float4_e2m1fnx2") if hasattr(torch, "float4_e2m1fn_x2") else int8
    if named.kind in ("int", "uint") and named.bits < 8:
        return int8
    raise TypeError(_not_held_message(named))


def __getattr__(name):
    """``_TORCH_DTYPE_TO_STR`` (TileLang's private table of torch dtypes to dtype names,
    which its example utilities import), made on first use: importing torch is the
    caller's choice."""
    if name == "_TORCH_DTYPE_TO_STR":
        import torch
        table = {getattr(torch, _TORCH_NAMES.get(d.name, d.name)): d.name
                 for d in ALL_DTYPES if hasattr(torch, _TORCH_NAMES.get(d.name, d.name))}
        table.update({torch.half: "float16", torch.float: "float32", torch.double: "float64",
                      torch.short: "int16", torch.int: "int32", torch.long: "int64"})
        globals()[name] = table
        return table
    raise not_in_module(name, "tilelang.language.dtypes", __name__,
                        "of TileLang's dtype helpers tilejit has the dtypes, DType (T.dtype) "
                        "and its methods (as_torch, bits, is_float8, ...), as_dtype")

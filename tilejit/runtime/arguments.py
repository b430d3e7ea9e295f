"""Call arguments: binding to parameters, description as types, and the checks that
run before any launch (SPEC, Errors)."""
from __future__ import annotations

import numbers

import numpy as np

from tilejit.language.dtypes import DType, as_dtype

VECTOR_BYTES = 16


class TensorArg:
    """One array argument as the host sees it: data pointer, shape and strides in
    elements, dtype, and where it lives (device ordinal, or -1 for host memory)."""
    __slots__ = ("obj", "ptr", "shape", "strides", "dtype", "device", "is_torch", "stream")

    def __init__(self, obj, ptr, shape, strides, dtype, device, is_torch, stream=None):
        self.obj, self.ptr, self.shape, self.strides = obj, ptr, shape, strides
        self.dtype, self.device, self.is_torch = dtype, device, is_torch
        # the stream the array's producer works on (__cuda_array_interface__ v3), which a
        # launch without torch tensors uses, or None
        self.stream = stream

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def span_bytes(self) -> int:
        """The bytes from its first element to its last (0 when it has none)."""
        return element_span(self.shape, self.strides) * self.dtype.itemsize

    @property
    def contiguous_last(self) -> bool:
        return self.ndim == 0 or self.strides[-1] == 1 or self.shape[-1] == 1

    @property
    def aligned(self) -> bool:
        """Data 16-byte aligned and every row start too (all strides but the last a
        multiple of 16 bytes, and positive where the extent is above 1: no broadcast
        dimension): the condition for 16-byte vector accesses and for TMA's tensor maps.
        A packed tensor (float4_e2m1fn, int4) is accessed element by element: never."""
        if not self.contiguous_last or self.ptr % VECTOR_BYTES or self.dtype.packed > 1:
            return False
        per = VECTOR_BYTES // self.dtype.itemsize
        return all(s % per == 0 and (s > 0 or n == 1)
                   for s, n in zip(self.strides[:-1], self.shape[:-1]))

    def type_key(self):
        return ("tensor", self.dtype.name, self.ndim, self.contiguous_last, self.aligned)


class PackedTensor:
    """A tensor of float4_e2m1fn or int4 held in bytes, two elements a byte (element 2k in
    the low four bits), as TileLang's programs pass one: a uint8 or int8 tensor (or
    torch's float4_e2m1fn_x2) for a parameter annotated float4_e2m1fn or int4. Its
    logical shape doubles the last extent; its strides in elements double the others
    (the last must be 1)."""

    __slots__ = ("storage", "dtype")

    def __init__(self, storage, dtype):
        self.storage, self.dtype = storage, as_dtype(dtype)
        if self.dtype.packed == 1:
            raise TypeError(f"PackedTensor holds a dtype of less than a byte "
                            f"(float4_e2m1fn, int4), got {self.dtype.name}")

    @property
    def shape(self) -> tuple:
        """The logical shape (what ``X.shape`` is in a kernel's host code)."""
        return as_tensor_arg(self).shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def stride(self, dim=None):
        """The logical strides, in elements (torch's ``stride()``)."""
        strides = as_tensor_arg(self).strides
        return strides if dim is None else strides[dim]

    @property
    def device(self):
        return self.storage.device

    def __repr__(self) -> str:
        return f"PackedTensor({self.dtype.name}, shape={self.shape}, bytes={self.storage!r:.80})"


STORAGE_OF_PACKED = ("uint8", "int8", "float4_e2m1fn")   # what may hold packed elements


def as_declared(value, dtype: DType):
    """``value`` as the argument of a parameter declared ``dtype``: a byte tensor for a
    packed dtype wrapped as a ``PackedTensor``; anything else as it is."""
    if dtype.packed == 1 or isinstance(value, PackedTensor):
        return value
    arg = as_tensor_arg(value)
    if arg is None or arg.dtype.packed > 1 or arg.dtype.name not in STORAGE_OF_PACKED:
        return value
    return PackedTensor(value, dtype)


def packed_hint(dtype: DType) -> str:
    """For a packed dtype (int4, float4_e2m1fn), how a tensor of it is passed (appended
    to an argument's dtype or extent error); "" for any other."""
    if dtype.packed == 1:
        return ""
    return (f" ({dtype.with_article} tensor is passed as its bytes: an int8 or uint8 tensor "
            f"of half the last extent, element 2k in the low four bits)")


def _packed_arg(storage: TensorArg, obj, dtype: DType) -> TensorArg:
    n = dtype.packed
    if storage.ndim == 0 or storage.strides[-1] != 1 and storage.shape[-1] > 1:
        raise ValueError(f"{dtype.with_article} tensor is held {n} elements a byte: its bytes' "
                         f"last dimension must be contiguous (stride 1), got strides "
                         f"{storage.strides}")
    shape = storage.shape[:-1] + (storage.shape[-1] * n,)
    strides = tuple(s * n for s in storage.strides[:-1]) + (1,)
    return TensorArg(obj, storage.ptr, shape, strides, dtype, storage.device,
                     storage.is_torch, storage.stream)


def _torch_tensor(x) -> TensorArg:
    dtype = as_dtype(x.dtype)
    if dtype.packed > 1:                # torch's float4_e2m1fn_x2: two a byte
        import torch    # only for a tensor of it
        storage = _torch_tensor(x.view(torch.uint8))
        return _packed_arg(storage, PackedTensor(x, dtype), dtype)
    device = x.device.index if x.is_cuda else -1
    if x.is_cuda and device is None:
        device = 0
    return TensorArg(x, x.data_ptr(), tuple(x.shape), tuple(x.stride()), dtype, device, True)


def _numpy_array(x: np.ndarray) -> TensorArg:
    dtype = as_dtype(x.dtype)
    size = x.itemsize
    if any(s % size for s in x.strides):
        raise ValueError("numpy array with strides that are not a multiple of its itemsize")
    return TensorArg(x, x.ctypes.data, x.shape, tuple(s // size for s in x.strides), dtype,
                     -1, False)


def _cuda_array(x) -> TensorArg:
    iface = x.__cuda_array_interface__
    npd = np.dtype(iface["typestr"])
    dtype = as_dtype(npd)
    shape = tuple(iface["shape"])
    strides = iface.get("strides")
    if strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    else:
        strides = tuple(s // npd.itemsize for s in strides)
    # the driver (cuda.bindings) is imported by the first array that needs it
    from tilejit.runtime import cuda_driver
    ptr, device = cuda_driver.tensor_pointer(x)
    stream = iface.get("stream")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)
                               or stream == 0):
        raise ValueError(f"{type(x).__name__}.__cuda_array_interface__['stream'] must be None "
                         f"or a nonzero int (1: the legacy default stream, 2: per-thread), got "
                         f"{stream!r}")
    return TensorArg(x, ptr, shape, strides, dtype, device, False, stream)


def _dlpack_array(x) -> TensorArg:
    """A DLPack array without torch: read from its capsule (``dlpack.py``); a host one
    as numpy."""
    from tilejit.runtime import dlpack   # ctypes structures: only for a DLPack argument
    described = dlpack.view(x)
    if not described.on_gpu:
        return _numpy_array(dlpack.host_array(x))
    return TensorArg(x, described.ptr, described.shape, described.strides, described.dtype,
                     described.device_id, False, dlpack.LEGACY_DEFAULT_STREAM)


class TensorSpec:
    """A tensor described by shape and dtype only (contiguous, 16-byte aligned), for
    compiling without data: ``kernel.compile(TensorSpec((M, K), "float16"), …)``."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = as_dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def reshape(self, *shape) -> "TensorSpec":
        """The same elements described with another shape (a 0-d tensor's one-element
        view: host.scalar_views)."""
        return TensorSpec(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple)
                          else shape, self.dtype)

    def as_arg(self) -> TensorArg:
        strides, acc = [], 1
        for n in reversed(self.shape):
            strides.append(acc)
            acc *= max(n, 1)
        return TensorArg(self, 0, self.shape, tuple(reversed(strides)), self.dtype, -1, False)


class DevicePointer(int):
    """A ``T.ptr`` argument given as a tensor: its address, an int64 scalar to the
    kernel, the device it lives on (``device``), where the kernel then runs, and the
    torch tensor it came from, if one (``torch``: the launch takes torch's stream)."""

    def __new__(cls, address: int, device: int, torch=None):
        self = super().__new__(cls, address)
        self.device, self.torch = device, torch
        return self


def as_tensor_arg(x):
    """A TensorArg for an array argument, or None if ``x`` is not an array."""
    if isinstance(x, TensorSpec):
        return x.as_arg()
    if isinstance(x, PackedTensor):
        storage = as_tensor_arg(x.storage)
        if storage is None or storage.dtype.name not in STORAGE_OF_PACKED:
            raise TypeError(f"a {x.dtype.name} tensor is held in bytes: expected a uint8, "
                            f"int8 or float4_e2m1fn_x2 tensor, got {type(x.storage).__name__}"
                            f"{'' if storage is None else ' of ' + storage.dtype.name}")
        if storage.dtype.packed > 1:        # torch's float4_e2m1fn_x2, already logical
            return TensorArg(x, storage.ptr, storage.shape, storage.strides, x.dtype,
                             storage.device, storage.is_torch, storage.stream)
        return _packed_arg(storage, x, x.dtype)
    module = type(x).__module__
    if module.startswith("torch") and hasattr(x, "data_ptr"):
        return _torch_tensor(x)
    if isinstance(x, np.ndarray):
        return _numpy_array(x)
    if hasattr(x, "__cuda_array_interface__"):
        return _cuda_array(x)
    if hasattr(x, "__dlpack__"):
        return _dlpack_array(x)
    return None


def launch_stream(tensors, device: int, torch_tensor) -> tuple[int, list]:
    """(the stream a launch uses, the other streams it must wait for): torch's current
    stream when an argument is a torch tensor; else the first stream an array's protocol
    names (``__cuda_array_interface__``'s ``stream``: 1 is the legacy default stream, 0
    here; DLPack arrays were asked for the legacy one), else the legacy default stream.
    An array whose producer is on another stream is waited for first."""
    named = []
    for t in tensors:
        if t.stream is not None:
            handle = 0 if t.stream == 1 else t.stream
            if handle not in named:
                named.append(handle)
    if torch_tensor is not None:
        # the driver (cuda.bindings) stays off `import tilejit`; loaded by a launch
        from tilejit.runtime import cuda_driver
        stream = cuda_driver.current_stream(device, True)
    else:
        stream = named[0] if named else 0
    return stream, [s for s in named if s != stream]


def check_scalar(name: str, value, dtype) -> None:
    """A scalar parameter's value: a Python or numpy number of the annotation's kind (an
    integer for an integer dtype; a bool only for bool), else a TypeError naming it."""
    if isinstance(value, (bool, np.bool_)):
        ok = dtype.name == "bool"           # a bool is not taken for a number
    else:
        ok = isinstance(value, numbers.Integral) if not dtype.is_float else isinstance(
            value, numbers.Real)
    if not ok:
        raise TypeError(f"argument {name!r}: expected {dtype.with_article} scalar, got "
                        f"{type(value).__name__}" + (f" {value!r}" if isinstance(
                            value, (numbers.Number, str, np.bool_)) else ""))


def typed_scalar(name: str, value, dtype):
    """A scalar parameter's value in its annotation's dtype (``alpha: T.float32`` is a
    float32 in the kernel, as TileLang's typed variable: ``alpha * x`` of a float16 x is
    computed in float32, not rounded to float16 as a Python float's would be), checked
    (``check_scalar``); bool and the dtypes numpy has no scalar of stay as given."""
    check_scalar(name, value, dtype)
    if dtype.name not in _NUMPY_SCALARS or isinstance(value, (bool, np.bool_)):
        return value
    kind = np.dtype(dtype.name)
    if kind.kind in "iu" and not np.iinfo(kind).min <= int(value) <= np.iinfo(kind).max:
        raise ValueError(f"argument {name!r}: {value} does not fit in {dtype.name}")
    return kind.type(value)


_NUMPY_SCALARS = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64")


def scalar_key(name: str, value):
    """The type key of a run-time scalar argument."""
    if isinstance(value, (bool, np.bool_)):
        return ("scalar", "bool")
    if isinstance(value, (int, np.integer)):
        if isinstance(value, np.integer):
            return ("scalar", np.dtype(type(value)).name)
        if not -(2 ** 63) <= value < 2 ** 63:
            raise ValueError(f"argument {name!r}: integer {value} does not fit in int64"
                             + (f"; pass np.uint64({value}) for an unsigned 64-bit value "
                                f"(a seed)" if 0 <= value < 2 ** 64 else ""))
        return ("scalar", "int64")
    if isinstance(value, (float, np.floating)):
        if isinstance(value, np.floating):
            return ("scalar", np.dtype(type(value)).name)
        return ("scalar", "weak_float")
    raise TypeError(f"argument {name!r}: expected a tensor, an array, a number or a "
                    f"compile-time value (dtype, str, tuple), got {type(value).__name__}")


def is_compile_time_value(value) -> bool:
    """dtypes, strings, tuples and None (an optional tensor left out) specialize the
    kernel; everything else is a run-time argument."""
    return value is None or isinstance(value, (DType, str, tuple)) or (
        type(value).__module__ == "torch" and type(value).__name__ == "dtype")


def pointer_argument(name, value):
    """A ``T.ptr`` argument's address: a tensor's data pointer (a ``DevicePointer``, which
    tells where it lives) or an int."""
    arg = as_tensor_arg(value)
    if arg is not None:
        return DevicePointer(arg.ptr, arg.device, arg.obj if arg.is_torch else None)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        # an address given as an int (``tensor.data_ptr()``): where the driver says it
        # was allocated, else host memory (the simulator). Loaded for such a call only
        from tilejit.runtime import cuda_driver
        device = cuda_driver.address_device(int(value))
        return DevicePointer(int(value), device) if device >= 0 else int(value)
    raise TypeError(f"argument {name!r}: expected a tensor or an address (an int, "
                    f"tensor.data_ptr()) for a T.ptr parameter, got {type(value).__name__}")


def element_span(shape, strides) -> int:
    """The elements from a strided tensor's first to its last (0 when it has none)."""
    return 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides)) if all(shape) else 0

"""Call arguments: binding to parameters, description as types, and the checks that
run before any launch (SPEC, Errors)."""
from __future__ import annotations

import numpy as np

from tilejit.language.dtypes import DType, as_dtype

VECTOR_BYTES = 16


class TensorArg:
    """One array argument as the host sees it: data pointer, shape and strides in
    elements, dtype, and where it lives (device ordinal, or -1 for host memory)."""
    __slots__ = ("obj", "ptr", "shape", "strides", "dtype", "device", "is_torch")

    def __init__(self, obj, ptr, shape, strides, dtype, device, is_torch):
        self.obj, self.ptr, self.shape, self.strides = obj, ptr, shape, strides
        self.dtype, self.device, self.is_torch = dtype, device, is_torch

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous_last(self) -> bool:
        return self.ndim == 0 or self.strides[-1] == 1 or self.shape[-1] == 1

    @property
    def aligned(self) -> bool:
        """Data 16-byte aligned and every row start too (all strides but the last a
        multiple of 16 bytes, and positive where the extent is above 1: no broadcast
        dimension): the condition for 16-byte vector accesses and for TMA's tensor maps."""
        if not self.contiguous_last or self.ptr % VECTOR_BYTES:
            return False
        per = VECTOR_BYTES // self.dtype.itemsize
        return all(s % per == 0 and (s > 0 or n == 1)
                   for s, n in zip(self.strides[:-1], self.shape[:-1]))

    def type_key(self):
        return ("tensor", self.dtype.name, self.ndim, self.contiguous_last, self.aligned)


def _torch_tensor(x) -> TensorArg:
    dtype = as_dtype(x.dtype)
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
    return TensorArg(x, ptr, shape, strides, dtype, device, False)


class TensorSpec:
    """A tensor described by shape and dtype only (contiguous, 16-byte aligned), for
    compiling without data: ``kernel.compile(TensorSpec((M, K), "float16"), …)``."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = as_dtype(dtype)

    def as_arg(self) -> TensorArg:
        strides, acc = [], 1
        for n in reversed(self.shape):
            strides.append(acc)
            acc *= max(n, 1)
        return TensorArg(self, 0, self.shape, tuple(reversed(strides)), self.dtype, -1, False)


def as_tensor_arg(x):
    """A TensorArg for an array argument, or None if ``x`` is not an array."""
    if isinstance(x, TensorSpec):
        return x.as_arg()
    module = type(x).__module__
    if module.startswith("torch") and hasattr(x, "data_ptr"):
        return _torch_tensor(x)
    if isinstance(x, np.ndarray):
        return _numpy_array(x)
    if hasattr(x, "__cuda_array_interface__"):
        return _cuda_array(x)
    if hasattr(x, "__dlpack__"):
        try:
            import torch
        except ImportError:
            raise TypeError(f"{type(x).__name__}: DLPack arrays need torch installed") from None
        return _torch_tensor(torch.from_dlpack(x))
    return None


def scalar_key(name: str, value):
    """The type key of a run-time scalar argument."""
    if isinstance(value, (bool, np.bool_)):
        return ("scalar", "bool")
    if isinstance(value, (int, np.integer)):
        if isinstance(value, np.integer):
            return ("scalar", np.dtype(type(value)).name)
        if not -(2 ** 63) <= value < 2 ** 63:
            raise ValueError(f"argument {name!r}: integer {value} does not fit in int64")
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

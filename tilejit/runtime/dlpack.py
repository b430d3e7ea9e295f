"""DLPack arrays without torch: the ``DLTensor`` of a ``__dlpack__()`` capsule read with
ctypes (the DLPack C header, ``dlpack.h``: data, device, ndim, dtype, shape, strides,
byte offset), so a JAX or CuPy array reaches a kernel without importing torch.

The consumer asks the producer for the capsule on the stream it will launch on
(``__dlpack__(stream=...)``: the producer makes its pending work visible to that stream);
the capsule keeps the producer's tensor description alive while it is referenced, and
the array itself stays alive through the caller's reference to it, as for every
argument.
"""
from __future__ import annotations

import ctypes

import numpy as np

from tilejit.language.dtypes import as_dtype

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
# DLPack's stream numbers for CUDA: 1 the legacy default stream, 2 the per-thread one
LEGACY_DEFAULT_STREAM = 1
_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool",
          10: "float8_e4m3", 12: "float8_e5m2",      # (kDLFloat8_e4m3fn, kDLFloat8_e5m2)
          14: "float8_e8m0fnu"}                      # (kDLFloat8_e8m0fnu)


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLPackView:
    """What a capsule describes: the data address (byte offset included), device
    (``device_type``, ``device_id``), dtype, shape and strides in elements; ``capsule``
    keeps the description alive."""
    __slots__ = ("capsule", "ptr", "device_type", "device_id", "dtype", "shape", "strides")

    def __init__(self, capsule):
        if not _is_valid(capsule, b"dltensor"):
            raise TypeError("__dlpack__() did not return an unused DLPack capsule")
        # DLManagedTensor starts with its DLTensor
        tensor = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
        code = _CODES.get(tensor.dtype.code)
        if code is None or tensor.dtype.lanes != 1:
            raise TypeError(f"DLPack dtype code {tensor.dtype.code} with {tensor.dtype.lanes} "
                            f"lanes is not a tilejit dtype")
        name = code if code in ("bool", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu") else \
            f"{code}{tensor.dtype.bits}"
        self.dtype = as_dtype(name)
        self.capsule = capsule
        self.ptr = (tensor.data or 0) + tensor.byte_offset
        self.device_type, self.device_id = tensor.device.device_type, tensor.device.device_id
        self.shape = tuple(tensor.shape[d] for d in range(tensor.ndim))
        if tensor.strides:
            self.strides = tuple(tensor.strides[d] for d in range(tensor.ndim))
        else:                                   # NULL: compact row-major
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.append(acc)
                acc *= n
            self.strides = tuple(reversed(strides))

    @property
    def on_gpu(self) -> bool:
        return self.device_type in (KDL_CUDA, KDL_CUDA_MANAGED)


def view(x) -> DLPackView:
    """The DLPack description of ``x``: a GPU array is asked for on the legacy default
    stream, the one a launch without torch tensors uses."""
    device_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else KDL_CPU
    if int(device_type) in (KDL_CUDA, KDL_CUDA_MANAGED):
        return DLPackView(x.__dlpack__(stream=LEGACY_DEFAULT_STREAM))
    return DLPackView(x.__dlpack__())


def host_array(x) -> np.ndarray:
    """A host DLPack array as a writable numpy view of its memory (``np.from_dlpack``
    marks a legacy capsule's array read-only, and a kernel may write its argument); the
    caller's reference to ``x`` keeps the memory alive, as for every argument."""
    described = view(x)
    if described.dtype.held_in_float32:
        return np.from_dlpack(x)        # bfloat16/float8: numpy's own view (ml_dtypes)
    itemsize = described.dtype.itemsize
    extent = 1 + sum((n - 1) * abs(s) for n, s in zip(described.shape, described.strides))
    if 0 in described.shape or described.ptr == 0:
        return np.empty(described.shape, described.dtype.numpy)
    low = described.ptr + itemsize * sum(
        (n - 1) * s for n, s in zip(described.shape, described.strides) if s < 0)
    buffer = (ctypes.c_char * (extent * itemsize)).from_address(low)
    base = np.frombuffer(buffer, dtype=described.dtype.numpy)
    return np.lib.stride_tricks.as_strided(
        base[(described.ptr - low) // itemsize:], shape=described.shape,
        strides=tuple(s * itemsize for s in described.strides), writeable=True)

"""Device memory tilejit allocates itself: the ``T.empty`` outputs of a kernel whose
tensor arguments are CUDA arrays other than torch tensors (CuPy, Numba device arrays,
JAX through DLPack), so that no torch is imported for them.

A ``DeviceArray`` is a C-contiguous block from ``cuMemAlloc`` on one device, freed when
the last reference to it goes. It is handed on through both protocols:

- ``__cuda_array_interface__`` (version 3, ``stream`` None: the kernel that wrote it ran
  on the legacy default stream, which every blocking stream waits for): ``cupy.asarray``,
  ``numba.cuda.as_cuda_array``, ``torch.as_tensor``; not for bfloat16/float8, which the
  protocol's type strings cannot name;
- ``__dlpack__`` / ``__dlpack_device__``: ``jax.dlpack.from_dlpack``, ``cupy.from_dlpack``,
  ``torch.from_dlpack``. The capsule's deleter, which the consumer calls when it lets go,
  drops the reference the capsule holds; a capsule never consumed keeps its array alive.

``numpy()`` copies the array to the host; ``DeviceArray.from_numpy(a, device)`` copies a
numpy array to a new one (inputs for a process without torch).
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from tilejit.language.dtypes import as_dtype
from tilejit.runtime import dlpack

_DL_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4, "bool": 6}
_DL_NAMED = {"float8_e4m3": (10, 8), "float8_e5m2": (12, 8), "float8_e8m0fnu": (14, 8)}


class DeviceArray:
    """``shape`` elements of ``dtype``, row-major, in the memory of CUDA device ``device``."""

    def __init__(self, shape, dtype, device: int = 0):
        from tilejit.runtime import cuda_driver    # the driver only when memory is used
        self.dtype = as_dtype(dtype)
        self.shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self.shape):
            raise ValueError(f"DeviceArray: negative extent in shape {self.shape}")
        self.device = int(device)
        self.ptr = 0
        self.ptr = cuda_driver.alloc(self.nbytes, self.device)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device: int = 0) -> "DeviceArray":
        from tilejit.runtime import cuda_driver    # the driver only when memory is used
        array = np.ascontiguousarray(array)
        out = cls(array.shape, array.dtype.name, device)
        if array.nbytes:
            cuda_driver.memcpy_htod(out.ptr, array)
        return out

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        """In elements, row-major."""
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))

    def numpy(self) -> np.ndarray:
        """A host copy (synchronous; bfloat16/float8 come back as their raw bits: numpy
        has no such dtypes)."""
        from tilejit.runtime import cuda_driver    # the driver only when memory is used
        host_dtype = self.dtype.numpy if not self.dtype.held_in_float32 else \
            np.dtype(f"uint{self.dtype.itemsize * 8}")
        out = np.empty(self.shape, host_dtype)
        if self.nbytes:
            cuda_driver.memcpy_dtoh(out, self.ptr)
        return out

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.dtype.held_in_float32:
            raise AttributeError(f"__cuda_array_interface__ cannot describe {self.dtype.name} "
                                 f"(its type strings have no such type): use __dlpack__")
        return {"shape": self.shape, "typestr": self.dtype.numpy.str,
                "data": (self.ptr, False), "strides": None, "version": 3, "stream": None}

    def __dlpack_device__(self) -> tuple:
        return (dlpack.KDL_CUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array (legacy, unversioned ``DLManagedTensor``); the
        kernel that wrote it ran on the legacy default stream, so ``stream`` asks for no
        extra ordering."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__: copy=True is not supported")
        return _capsule(self)

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"device={self.device})")

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            try:
                from tilejit.runtime import cuda_driver    # the driver only when memory is used
                cuda_driver.free(ptr)
            except Exception:       # interpreter shutdown / the driver already torn down
                pass


# --------------------------------------------------------------------------- DLPack export
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _ManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", dlpack._DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


# managed tensor address -> what it points at (the struct, its shape and strides, the
# array), alive until the consumer calls the deleter
_EXPORTED: dict[int, tuple] = {}


@_DELETER
def _delete(address):
    _EXPORTED.pop(address, None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _dl_dtype(dtype):
    if dtype.name in _DL_NAMED:
        code, bits = _DL_NAMED[dtype.name]
        return dlpack._DataType(code, bits, 1)
    kind = "bool" if dtype.name == "bool" else dtype.name.rstrip("0123456789")
    return dlpack._DataType(_DL_CODES[kind], dtype.itemsize * 8, 1)


def _capsule(array: DeviceArray):
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(array.ndim, 1))(*array.strides)
    managed = _ManagedTensor()
    managed.dl_tensor.data = array.ptr or None
    managed.dl_tensor.device = dlpack._Device(dlpack.KDL_CUDA, array.device)
    managed.dl_tensor.ndim = array.ndim
    managed.dl_tensor.dtype = _dl_dtype(array.dtype)
    managed.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    managed.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    managed.dl_tensor.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _EXPORTED[address] = (managed, shape, strides, array)
    return _capsule_new(address, b"dltensor", None)

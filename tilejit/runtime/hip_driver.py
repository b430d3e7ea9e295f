"""Launching AMDGPU code objects through HIP's module API (ROCm), by ctypes.

Why ctypes on ``libamdhip64.so`` and not hip-python or OpenCL: the module API is five
functions (``hipModuleLoadData``, ``hipModuleGetFunction``, ``hipModuleLaunchKernel``,
``hipSetDevice``, ``hipGetErrorString``), every ROCm installation has the library (a
ROCm build of torch loads it), and nothing needs to be installed beside tilejit; the
code object is the one ``codegen/amdgpu.code_object`` links with no ROCm at all.

The kernel's arguments are packed into one kernarg buffer at the offsets the code
object's metadata gives (``hsaco.kernels``: each flat parameter, a pointer, a shape entry,
a stride or a scalar, is one argument), and passed with ``HIP_LAUNCH_PARAM_BUFFER_POINTER``
/ ``_SIZE`` / ``_END`` in ``extra``. The kernel's tiles live in one dynamic LDS array
(``@__tj_smem``, external, as CUDA's ``extern __shared__``): a launch asks for the plan's
shared bytes (``sharedMemBytes``), beyond the metadata's static group segment.

Not run on an AMD GPU here (no session is lent one): the tests load a fake library with
the same five functions, which runs the kernel's LLVM IR on the CPU
(``tests/support/fake_hip.py``). ``use_library`` installs one; by default
``libamdhip64.so`` (``TILEJIT_HIP_LIBRARY`` names another path) is loaded on first use.
"""
from __future__ import annotations

import ctypes
import struct

from tilejit.options import hip_library
from tilejit.runtime.hsaco import kernels

HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03

_LIBRARY = None


class HipError(RuntimeError):
    def __init__(self, call: str, code: int, detail: str = ""):
        self.code = code
        text = error_string(code)
        super().__init__(f"{call} failed: hipError {code} ({text})"
                         + (f": {detail}" if detail else ""))


def use_library(library) -> None:
    """Launch through ``library`` (a ctypes CDLL of libamdhip64, or an object with the
    same functions: the tests' fake); None goes back to loading the real one."""
    global _LIBRARY
    _LIBRARY = library


def library():
    """The HIP runtime library, loaded on first use."""
    global _LIBRARY
    if _LIBRARY is None:
        path = hip_library()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise RuntimeError(f"launching on an AMD GPU needs ROCm's HIP runtime "
                               f"({path}): {e}") from None
        lib.hipGetErrorString.restype = ctypes.c_char_p
        lib.hipModuleLaunchKernel.argtypes = (
            [ctypes.c_void_p] + [ctypes.c_uint] * 7
            + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])
        _LIBRARY = lib
    return _LIBRARY


def hip_available() -> bool:
    try:
        lib = library()
        count = ctypes.c_int(0)
        return lib.hipGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0
    except RuntimeError:
        return False


def error_string(code: int) -> str:
    try:
        text = library().hipGetErrorString(code)
    except (RuntimeError, AttributeError):
        return "unknown"
    return text.decode() if isinstance(text, bytes) else str(text)


def _check(call: str, code: int, detail: str = "") -> None:
    if code:
        raise HipError(call, int(code), detail)


class HipModule:
    """A code object loaded on one device, and its kernel's function and metadata."""

    def __init__(self, code_object: bytes, kernel_name: str, device: int = 0):
        infos = kernels(code_object)
        if kernel_name not in infos:
            raise ValueError(f"the code object has no kernel {kernel_name!r} "
                             f"(it has {sorted(infos)})")
        self.info = infos[kernel_name]
        self.device = device
        lib = library()
        _check("hipSetDevice", lib.hipSetDevice(device))
        self._image = ctypes.create_string_buffer(code_object, len(code_object))
        self.handle = ctypes.c_void_p()
        _check("hipModuleLoadData", lib.hipModuleLoadData(ctypes.byref(self.handle),
                                                          self._image), kernel_name)
        self.function = ctypes.c_void_p()
        _check("hipModuleGetFunction", lib.hipModuleGetFunction(
            ctypes.byref(self.function), self.handle, kernel_name.encode()), kernel_name)


class HipLauncher:
    """Launches a ``HipModule``'s kernel: the flat parameters (``param_formats``, the
    struct characters the compiler gives each) packed at the metadata's offsets."""

    def __init__(self, module: HipModule, param_formats):
        info = module.info
        explicit = info.explicit_args
        if len(explicit) != len(param_formats):
            raise ValueError(f"kernel {info.name}: {len(param_formats)} parameters, the code "
                             f"object's metadata lists {len(explicit)}")
        self.module = module
        self._fields = []
        for arg, fmt in zip(explicit, param_formats):
            if struct.calcsize("<" + fmt) != arg.size:
                raise ValueError(f"kernel {info.name}: parameter at offset {arg.offset} is "
                                 f"{arg.size} bytes in the metadata, {fmt!r} here")
            self._fields.append((arg.offset, struct.Struct("<" + fmt)))
        self._size = max(info.kernarg_size, 8)
        self._buf = ctypes.create_string_buffer(self._size)
        self._size_holder = ctypes.c_size_t(self._size)
        self._extra = (ctypes.c_void_p * 5)(
            HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self._buf),
            HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self._size_holder),
            HIP_LAUNCH_PARAM_END)

    def launch(self, grid, threads: int, stream, values, lds_bytes: int = 0) -> None:
        """``lds_bytes``: the dynamic LDS the kernel's tiles take (the compiled kernel's
        ``shared_bytes``)."""
        info = self.module.info
        if len(values) != len(self._fields):
            raise ValueError(f"kernel {info.name}: {len(values)} values for "
                             f"{len(self._fields)} parameters")
        if info.max_threads and threads > info.max_threads:
            raise ValueError(f"kernel {info.name}: {threads} threads per block, compiled for "
                             f"at most {info.max_threads}")
        for (offset, field), value in zip(self._fields, values):
            field.pack_into(self._buf, offset, value)
        gx, gy, gz = grid
        _check("hipModuleLaunchKernel", library().hipModuleLaunchKernel(
            self.module.function, gx, gy, gz, threads, 1, 1, lds_bytes, stream or None, None,
            self._extra), f"kernel {info.name}, grid {tuple(grid)}, {threads} threads")

"""A stand-in for ROCm's libamdhip64 with the functions ``tilejit/runtime/hip_driver.py``
calls, for machines without an AMD GPU: ``hipModuleLoadData`` keeps the code object,
``hipModuleGetFunction`` finds the kernel in its metadata, and ``hipModuleLaunchKernel``
reads the kernarg buffer passed in ``extra`` and runs the kernel's LLVM IR on the CPU
(``amdgpu_cpu.run_flat``), device memory being host memory. The IR comes from the
compiled handle (``register``): a code object cannot run on a CPU. Every call is
recorded in ``calls``."""
from __future__ import annotations

import ctypes

from amdgpu_cpu import run_flat
from tilejit.runtime.hsaco import kernels

HIP_ERROR_INVALID_DEVICE = 101
HIP_ERROR_NOT_FOUND = 500
HIP_ERROR_INVALID_VALUE = 1


class FakeHip:
    def __init__(self, devices: int = 1):
        self.devices = devices
        self.calls = []
        self._modules = {}
        self._functions = {}
        self._ir = {}

    def register(self, handle) -> None:
        """The LLVM IR to run for ``handle``'s kernel (a compiled AMDGPU handle)."""
        self._ir[handle.compiled.name] = handle.llvm_ir

    # -- the library's functions (ctypes calling conventions) --------------------------
    def hipGetDeviceCount(self, count_ref):         # noqa: N802 - HIP's names
        count_ref._obj.value = self.devices
        return 0

    def hipSetDevice(self, device):                 # noqa: N802
        self.calls.append(("hipSetDevice", device))
        return 0 if 0 <= device < self.devices else HIP_ERROR_INVALID_DEVICE

    def hipGetErrorString(self, code):              # noqa: N802
        return {0: b"hipSuccess", 1: b"hipErrorInvalidValue",
                101: b"hipErrorInvalidDevice", 500: b"hipErrorNotFound"}.get(code, b"?")

    def hipModuleLoadData(self, module_ref, image):     # noqa: N802
        blob = bytes(image.raw) if hasattr(image, "raw") else bytes(image)
        handle = len(self._modules) + 1
        self._modules[handle] = blob
        module_ref._obj.value = handle
        self.calls.append(("hipModuleLoadData", len(blob)))
        return 0

    def hipModuleGetFunction(self, function_ref, module, name):     # noqa: N802
        blob = self._modules.get(module.value if hasattr(module, "value") else module)
        name = name.decode()
        if blob is None or name not in kernels(blob):
            return HIP_ERROR_NOT_FOUND
        handle = len(self._functions) + 1
        self._functions[handle] = (blob, name)
        function_ref._obj.value = handle
        self.calls.append(("hipModuleGetFunction", name))
        return 0

    def hipModuleLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream,  # noqa: N802
                              params, extra):
        blob, name = self._functions[function.value if hasattr(function, "value")
                                     else function]
        words = [extra[i] for i in range(5)]
        if params is not None or words[0] != 1 or words[2] != 2 or words[4] != 3:
            return HIP_ERROR_INVALID_VALUE
        size = ctypes.c_size_t.from_address(words[3]).value
        buffer = ctypes.string_at(words[1], size)
        info = kernels(blob)[name]
        if size < info.kernarg_size or by != 1 or bz != 1 or shared > 65536:
            return HIP_ERROR_INVALID_VALUE
        self.last_lds = shared
        raw = [buffer[a.offset:a.offset + a.size] for a in info.explicit_args]
        self.calls.append(("hipModuleLaunchKernel", name, (gx, gy, gz), bx, shared, stream))
        run_flat(self._ir[name], raw, (gx, gy, gz), bx)
        return 0

"""Which way of calling cuLaunchKernel costs least per call from Python (issue 24): the
cuda.bindings wrapper, ctypes on libcuda's exported symbol, ctypes on the pointer
cuGetProcAddress returns (the driver's own entry, without the export's trampoline), and
cuLaunchKernelEx through ctypes with a launch configuration built once (4 arguments).
Same kernel and parameters for all; torch.add beside. Best of 5 rounds, us per call.

    python benchmarks/experiments/launch_ffi_probe.py
"""
import ctypes
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples"))
from cuda.bindings import driver  # noqa: E402

from tilejit.runtime import cuda_driver  # noqa: E402
from vector_add import vector_add  # noqa: E402


class LaunchConfig(ctypes.Structure):       # CUlaunchConfig (cuda.h)
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


def main():
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    vector_add(a, b, c)
    handle = vector_add.compile(a, b, c)
    module = cuda_driver.CudaModule(handle.ptx, handle.compiled.name, 0, 0)
    launcher = cuda_driver.Launcher(module, handle.compiled.param_formats)
    launcher._pack(launcher._view, 0, a.data_ptr(), n, 1, b.data_ptr(), n, 1,
                   c.data_ptr(), n, 1)
    func, params = module.function, launcher._params_addr
    stream = torch.cuda.current_stream().cuda_stream
    vp = ctypes.c_void_p
    variants = {"cuda.bindings cuLaunchKernel": lambda: driver.cuLaunchKernel(
        func, 1, 1, 1, 256, 1, 1, 0, stream or None, params, 0)}
    lib = ctypes.CDLL("libcuda.so.1")
    sym = lib.cuLaunchKernel
    sym.restype = ctypes.c_int
    cf, cp, cs = vp(int(func)), vp(params), (vp(stream) if stream else None)
    variants["ctypes exported symbol"] = lambda: sym(cf, 1, 1, 1, 256, 1, 1, 0, cs, cp, None)
    flags = driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    for name in ("cuLaunchKernel", "cuLaunchKernelEx"):
        err, pfn, _status = driver.cuGetProcAddress(name.encode(), 13000, flags)
        if err or not int(pfn):
            print(f"cuGetProcAddress({name}): {err}")
            continue
        f = lib._FuncPtr(int(pfn))
        f.restype = ctypes.c_int
        if name == "cuLaunchKernel":
            variants["ctypes cuGetProcAddress pointer"] = (
                lambda f=f: f(cf, 1, 1, 1, 256, 1, 1, 0, cs, cp, None))
        else:
            config = LaunchConfig(1, 1, 1, 256, 1, 1, 0, stream or None, None, 0)
            ref = ctypes.byref(config)
            variants["ctypes cuLaunchKernelEx (config built once)"] = (
                lambda f=f, ref=ref: f(ref, cf, cp, None))
    variants["torch.add(a, b, out=c)"] = lambda: torch.add(a, b, out=c)
    variants["tilejit vector_add(a, b, c)"] = lambda: vector_add(a, b, c)
    best = {k: float("inf") for k in variants}
    for _ in range(5):
        for name, fn in variants.items():
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(10000):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best[name] = min(best[name], (t1 - t0) / 10000 * 1e6)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    for name, us in best.items():
        print(f"{name:48s} {us:7.3f} us")


if __name__ == "__main__":
    main()

"""tilejit: TileLang's tile programming model as a Numba-style JIT that emits PTX.

``import tilejit`` loads only what a launch needs; the autotuner, TileLang's front
door and the timing helpers load on first use (a process whose kernels are in the
disk cache reaches its first launch sooner)."""
import importlib
import sys

from tilejit.version import __version__  # noqa: E402

from tilejit import language  # noqa: E402
from tilejit.errors import AssumptionError, CompileError  # noqa: E402
from tilejit.language.compat import (AliasedSubmodules, MissingModules,  # noqa: E402
                                     ModuleOfName)
from tilejit.runtime.kernel import kernel  # noqa: E402
# the simulator gives the T.* operations their Python meaning; it is imported the first
# time one runs as Python (simulated kernels, direct calls), not by a compiled launch
language._semantics.install_on_demand(lambda: importlib.import_module("tilejit.sim"))
# TileLang's modules tilejit does not have: their import says so (language/compat.py)
if MissingModules not in sys.meta_path:
    sys.meta_path.append(MissingModules)
if AliasedSubmodules not in sys.meta_path:
    sys.meta_path.insert(0, AliasedSubmodules)
# `tilejit.jit` is TileLang's decorator, and `tilelang.jit` is a package too, whose names
# programs import (`from tilelang.jit import JITKernel, JITImpl`): that module is
# tilejit.tilelang.jit, registered under the name so that importing it does not put a
# module in the decorator's place (language/compat.py)
sys.modules.setdefault(f"{__name__}.jit", ModuleOfName(f"{__name__}.jit", "tilejit.tilelang.jit"))

_LAZY = {
    "autotune": ("tuning.autotune", "autotune"),
    "autotuner": ("autotuner", None),
    "jit": ("tilelang.jit", "jit"),
    "PassConfigKey": ("tilelang.jit", "PassConfigKey"),
    "compile": ("tilelang.classic", "compile"),
    "testing": ("testing", None),
    "profiler": ("profiler", None),
    "TensorSupplyType": ("tilelang.profiler", "TensorSupplyType"),
    "torch": ("torch", None),
    "load": ("runtime.aot", "load"),
    "utils": ("utils", None),
    "cdiv": ("tilelang.math", "cdiv"),
    "next_power_of_2": ("tilelang.math", "next_power_of_2"),
    "Profiler": ("tilelang.profiler", "Profiler"),
    "JITKernel": ("tilelang.jit", "JITKernel"),
    "dtypes": ("language.dtypes", None),
    "carver": ("carver", None),
    "math": ("tilelang.math", None),
    # TileLang's names tilejit does not have: reading one says so (language/compat.py)
    "tvm": ("tilelang.tvm", None),      # importable; its names raise (tilelang/tvm.py)
    "DataType": ("language", "dtype"),      # TVM's DataType(x).bits: tilejit's dtype class
    "par_compile": ("tilelang.classic", "par_compile"),
    "deprecated": ("tilelang.unsupported", "deprecated"),
    "build_date": ("tilelang.unsupported", "build_date"),
    "Layout": ("tilelang.layout", "Layout"),
    "Fragment": ("tilelang.layout", "Fragment"),
    "analysis": ("tilelang.unsupported", "analysis"),
    "transform": ("tilelang.transform", None),    # its names tilejit has; the rest raise
    "engine": ("tilelang.engine", None),    # its names tilejit has; the rest raise
    "tools": ("tilelang.unsupported", "tools"),
    "lower": ("tilelang.unsupported", "lower"),
    "register_cuda_postproc": ("tilelang.unsupported", "register_cuda_postproc"),
    "register_hip_postproc": ("tilelang.unsupported", "register_hip_postproc"),
    "register_c_postproc": ("tilelang.unsupported", "register_c_postproc"),
    "tileop": ("tilelang.tileop", None),    # GemmWarpPolicy; the rest raise
    "cpu": ("tilelang.unsupported", "cpu"),
    "cuda": ("tilelang.cuda", None),    # its names tilejit has; the rest raise
    "rocm": ("tilelang.unsupported", "rocm"),
    "metal": ("tilelang.unsupported", "metal"),
    "webgpu": ("tilelang.unsupported", "webgpu"),
    "env": ("tilelang.unsupported", "env"),
    "enable_cache": ("options", "enable_cache"),
    "disable_cache": ("options", "disable_cache"),
    "is_cache_enabled": ("options", "is_cache_enabled"),
    "set_log_level": ("log", "set_log_level"),
    "logger": ("log", "logger"),
    "libinfo": ("tilelang.unsupported", "libinfo"),
    "get_windows_runtime_dll_dirs": ("tilelang.unsupported", "get_windows_runtime_dll_dirs"),
    "prepend_dll_search_path": ("tilelang.unsupported", "prepend_dll_search_path"),
    "cache": ("tilelang.unsupported", "cache"),
    "contrib": ("tilelang.contrib", None),    # its names tilejit has; the rest raise
    "layout": ("tilelang.layout", None),
    "_ffi_api": ("tilelang._ffi_api", None),   # its Layout_* functions only
    "backend": ("tilelang.unsupported", "backend"),
    "instrumentation": ("tilelang.unsupported", "instrumentation"),
    "autodd": ("tilelang.unsupported", "autodd"),
    "quantize": ("tilelang.unsupported", "quantize"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'tilejit' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = ["kernel", "autotune", "autotuner", "jit", "compile", "PassConfigKey", "language",
           "testing", "profiler", "TensorSupplyType", "CompileError", "AssumptionError",
           "__version__"]

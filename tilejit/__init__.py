"""tilejit: TileLang's tile programming model as a Numba-style JIT that emits PTX.

``import tilejit`` loads only what a launch needs; the autotuner, TileLang's front
door and the timing helpers load on first use (a process whose kernels are in the
disk cache reaches its first launch sooner)."""
import importlib

from tilejit.version import __version__  # noqa: E402

from tilejit import language  # noqa: E402
from tilejit.errors import CompileError  # noqa: E402
from tilejit.runtime.kernel import kernel  # noqa: E402
# the simulator gives the T.* operations their Python meaning; it is imported the first
# time one runs as Python (simulated kernels, direct calls), not by a compiled launch
language._semantics.install_on_demand(lambda: importlib.import_module("tilejit.sim"))

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
           "testing", "profiler", "TensorSupplyType", "CompileError", "__version__"]

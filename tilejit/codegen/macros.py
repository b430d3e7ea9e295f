"""``@T.macro`` helpers as Numba device functions of the kernel being compiled.

Each kernel compilation gets its own dispatcher per macro (Numba caches compiled
overloads per dispatcher, and a macro's code depends on the kernel: its T.Parallel
loops are spread over that kernel's threads). The callee's LLVM module reaches the
kernel as a linking library and is inlined when the kernel is optimized."""
from __future__ import annotations

from tilejit.codegen.numba_pipeline import TilejitCompiler
from tilejit.codegen.numba_target import TilejitDeviceDispatcher
from tilejit.ir.kernel_config import current_kernel_or_none

_DISPATCHERS: dict = {}


def dispatcher_for(macro):
    kernel = current_kernel_or_none()
    key = (id(macro), id(kernel))
    entry = _DISPATCHERS.get(key)
    if entry is None or entry[0] is not macro or entry[1] is not kernel:
        if len(_DISPATCHERS) > 256:
            # other kernels' dispatchers only: Numba's type of a dispatcher holds it by a
            # weak reference, and the kernel being typed still uses its own (dropping one
            # mid-compilation was "ReferenceError: underlying object has vanished")
            for old in [k for k, e in _DISPATCHERS.items() if e[1] is not kernel]:
                del _DISPATCHERS[old]
        entry = (macro, kernel, TilejitDeviceDispatcher(macro.func, targetoptions={},
                                                        pipeline_class=TilejitCompiler))
        _DISPATCHERS[key] = entry
    return entry[2]

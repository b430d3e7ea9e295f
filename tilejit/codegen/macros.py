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
    key = (id(macro), id(current_kernel_or_none()))
    entry = _DISPATCHERS.get(key)
    if entry is None or entry[0] is not macro:
        if len(_DISPATCHERS) > 256:
            _DISPATCHERS.clear()
        entry = (macro, TilejitDeviceDispatcher(macro.func, targetoptions={},
                                                pipeline_class=TilejitCompiler))
        _DISPATCHERS[key] = entry
    return entry[1]

"""A compiled kernel as data (what the disk cache holds), and the one entry point
that finds it in the cache or compiles it. Importing this module does not import
Numba: only a cache miss loads the compiler."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompiledKernel:
    name: str
    llvm_ir: str = ""
    ptx: str = ""
    shared_bytes: int = 0
    param_formats: list = field(default_factory=list)
    # per hidden tensor-map parameter (after the others): (argument position, dtype name,
    # itemsize, box extents, swizzle bytes) (passes/tma.py, runtime/tensor_maps.py)
    tensor_maps: list = field(default_factory=list)


def load_or_compile(kernel, spec) -> CompiledKernel:
    """The compiled kernel from the disk cache, or compiled now (and stored). The
    simulator's type check always runs (it is the front end's, not an artifact)."""
    if spec.arch == "sim":
        from tilejit.compiler.pipeline import compile_kernel
        return compile_kernel(kernel.source, spec)
    from tilejit.runtime import kernel_cache
    cached = kernel_cache.load(kernel, spec)
    if cached is not None:
        return cached
    from tilejit.compiler.pipeline import compile_kernel
    compiled = compile_kernel(kernel.source, spec)
    kernel_cache.store(kernel, spec, compiled)
    return compiled

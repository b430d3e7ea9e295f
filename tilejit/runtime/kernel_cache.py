"""Compiled kernels on disk (``disk_cache.py`` is the store): the key hashes the kernel's
source and everything it calls, the specialization (argument types, constexprs, shape
constants, threads, the target, the compile options' ``key()``) and the compiler's
versions."""
from __future__ import annotations

import functools
import glob
import importlib.util
import os

from tilejit.version import __version__
from tilejit.runtime.disk_cache import DiskCache, digest, function_fingerprint

_STORE = DiskCache("kernels")


@functools.lru_cache(maxsize=None)
def _versions() -> tuple:
    """tilejit's, llvmlite's and Numba's versions, read from the installed
    distributions' metadata directories (importing importlib.metadata, or the packages,
    would cost a cache hit tens of milliseconds)."""
    out = [__version__]
    for package in ("llvmlite", "numba"):
        found = "unknown"
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            site = os.path.dirname(os.path.dirname(spec.origin))
            dists = glob.glob(os.path.join(site, f"{package}-*.dist-info"))
            if dists:
                found = os.path.basename(dists[0])[len(package) + 1:-len(".dist-info")]
        out.append(found)
    out.append(_compiler_sources())
    return tuple(out)


def _compiler_sources() -> str:
    """The size and modification time of every module of tilejit: an edited compiler
    (a development checkout) never reuses kernels the old one compiled. Stats only,
    well under a millisecond."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tilejit/
    parts = []
    for directory, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(directory, name))
                parts.append(f"{os.path.relpath(os.path.join(directory, name), root)}:"
                             f"{st.st_size}:{st.st_mtime_ns}")
    return digest("tilejit-sources", parts)


def key_of(kernel, spec) -> str:
    fingerprint = getattr(kernel, "_fingerprint", None)
    if fingerprint is None:
        fingerprint = kernel._fingerprint = function_fingerprint(kernel.source.func)
    return digest("tilejit-kernel", fingerprint, spec.describe(), _versions())


def load(kernel, spec):
    # tilejit.compiler only once a kernel is first loaded or compiled: `import tilejit`
    # loads none of it (artifact.py itself imports no Numba)
    from tilejit.compiler.artifact import CompiledKernel
    payload = _STORE.load(key_of(kernel, spec))
    if payload is None:
        return None
    try:
        return CompiledKernel(name=payload["name"], llvm_ir=payload["llvm_ir"],
                              ptx=payload["ptx"], shared_bytes=int(payload["shared_bytes"]),
                              param_formats=list(payload["param_formats"]),
                              tensor_maps=[tuple(m) for m in payload.get("tensor_maps", [])])
    except (KeyError, TypeError, ValueError):
        return None


def store(kernel, spec, compiled) -> None:
    _STORE.store(key_of(kernel, spec), {
        "name": compiled.name, "llvm_ir": compiled.llvm_ir, "ptx": compiled.ptx,
        "shared_bytes": compiled.shared_bytes, "param_formats": compiled.param_formats,
        "tensor_maps": [list(m) for m in compiled.tensor_maps]})


def load_or_compile(kernel, spec):
    """The compiled kernel from the disk cache, or compiled now (and stored). The
    simulator's type check always runs (it is the front end's, not an artifact); a
    compilation asked to dump its stages (``CompileOptions.dump_dir``) does not read the
    cache, so its stages are written."""
    if spec.target.is_sim:
        # the compiler (Numba) only when a kernel is first simulated: its type check always
        # runs, uncached
        from tilejit.compiler.pipeline import compile_kernel
        return compile_kernel(kernel.source, spec)
    cached = None if spec.options.dump_dir else load(kernel, spec)
    if cached is not None:
        return cached
    # the compiler, on a cache miss only: a process whose kernels are all cached never
    # imports Numba
    from tilejit.compiler.pipeline import compile_kernel
    compiled = compile_kernel(kernel.source, spec)
    store(kernel, spec, compiled)
    return compiled

"""Compiled kernels on disk (``disk_cache.py`` is the store): the key hashes the kernel's
source and everything it reads (the values of its globals and closure variables as its
first compilation resolved them, the functions it calls), the specialization (argument
types, constexprs, shape constants, threads, the target, the compile options' ``key()``)
and the compiler's versions."""
from __future__ import annotations

import functools
import importlib.util
import os
import warnings

from tilejit import syntax
from tilejit.log import logger
from tilejit.version import __version__
from tilejit.runtime.disk_cache import (CacheWarning, DiskCache, Unkeyable, cache_dir,
                                        digest, function_fingerprint)

_STORE = DiskCache("kernels")


@functools.lru_cache(maxsize=None)
def _versions() -> tuple:
    """tilejit's version, llvmlite's and Numba's installed files, and tilejit's sources.
    A package is identified by the size and modification time of its ``__init__.py`` and
    ``_version.py`` (a reinstall or an upgrade rewrites them): stats only, where reading
    the distributions' metadata (a listing of site-packages) cost a cache hit 5-12 ms,
    and importing the packages, or importlib.metadata, tens of milliseconds."""
    out = [__version__]
    for package in ("llvmlite", "numba"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            out.append("absent")
            continue
        stats = []
        for name in ("__init__.py", "_version.py"):
            try:
                st = os.stat(os.path.join(os.path.dirname(spec.origin), name))
            except OSError:
                continue
            stats.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        out.append(f"{package}:{','.join(stats)}")
    out.append(_compiler_sources())
    return tuple(out)


def _compiler_sources() -> str:
    """The size and modification time of every module of tilejit: an edited compiler
    (a development checkout) never reuses kernels the old one compiled. Stats only."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tilejit/
    parts = []
    for directory, _, files in sorted(os.walk(root)):
        rel = directory[len(root):]
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(directory, name))
                parts.append(f"{rel}/{name}:{st.st_size}:{st.st_mtime_ns}")
    return digest("tilejit-sources", parts)


class GlobalChangedWarning(UserWarning):
    """A global or closure variable a kernel reads was bound to another value after the
    kernel's first compilation, which keeps the first value."""


def key_of(kernel, spec) -> str | None:
    """The disk cache's key of ``kernel`` compiled for ``spec``; None when the kernel
    reads a value the key cannot hold by value (it is then compiled in each process).
    The fingerprint reads the kernel's own names in its resolved namespace (what the
    compiler reads) and is computed again for each specialization, since the helpers it
    calls read theirs when each is compiled."""
    source = kernel.source
    try:
        fingerprint = function_fingerprint(source.func, namespace=source.namespace,
                                           strict=True)
    except Unkeyable as e:
        if not getattr(kernel, "_told_unkeyable", False):
            kernel._told_unkeyable = True
            warnings.warn(
                f"tilejit cache: kernel {source.tree.name} ({source.filename}:"
                f"{source.tree.lineno}) reads {e.name}, a {e.type_name}, which the disk "
                "cache cannot key by value; the kernel is compiled in each process (read "
                "plain values, tuples, modules or classes instead to have it cached)",
                CacheWarning, stacklevel=4)
        return None
    # one launch of a kernel of several (runtime/sequence.py): the same function's source,
    # another program
    variant = kernel.launch_index
    extra = [] if variant is None else [["launch", variant]]
    try:
        # helpers a factory made when the kernel was defined (helper_factories.py): what
        # they were made with is theirs, not the kernel's reads
        extra += [["made", name, function_fingerprint(made, strict=True)]
                  for name, made in sorted(source.made.items())]
    except (Unkeyable, TypeError):
        return None
    return digest("tilejit-kernel", fingerprint, spec.describe(), _versions(), *extra)


def _warn_changed_globals(kernel) -> None:
    told = kernel.__dict__.setdefault("_told_changed", set())
    changed = [name for name in kernel.source.changed_globals() if name not in told]
    if changed:
        told.update(changed)
        source = kernel.source
        names = [n for n in changed if "." not in n]
        chains = [n for n in changed if "." in n]
        said = []
        if names:
            said.append(f"reads {', '.join(names)}, bound to another value since its first "
                        "compilation; it keeps the values it was first compiled with "
                        "(decorate the function again to compile it with the new ones)")
        if chains:      # an attribute read through a global is read per specialization
            said.append(f"reads {', '.join(chains)}, changed since its first compilation: "
                        "the specializations compiled before keep the old value, this one "
                        "and later ones read the new")
        warnings.warn(f"kernel {source.tree.name} ({source.filename}:{source.tree.lineno}) "
                      + "; and ".join(said), GlobalChangedWarning, stacklevel=4)


def load(kernel, spec, key=None):
    """The stored compiled kernel (``key``: ``key_of(kernel, spec)`` if known), or None."""
    # tilejit.compiler only once a kernel is first loaded or compiled: `import tilejit`
    # loads none of it (artifact.py itself imports no Numba)
    from tilejit.compiler.artifact import CompiledKernel
    key = key or key_of(kernel, spec)
    payload = None if key is None else _STORE.load(key)
    if payload is None:
        return None
    try:
        return CompiledKernel(name=payload["name"], llvm_ir=payload["llvm_ir"],
                              ptx=payload["ptx"], shared_bytes=int(payload["shared_bytes"]),
                              param_formats=list(payload["param_formats"]),
                              tensor_maps=[tuple(m) for m in payload.get("tensor_maps", [])],
                              block_threads=int(payload.get("block_threads", 0)),
                              cooperative=bool(payload.get("cooperative", False)))
    except (KeyError, TypeError, ValueError):
        return None


def store(kernel, spec, compiled, key=None) -> None:
    key = key or key_of(kernel, spec)
    if key is None:
        return
    _STORE.store(key, {
        "name": compiled.name, "llvm_ir": compiled.llvm_ir, "ptx": compiled.ptx,
        "shared_bytes": compiled.shared_bytes, "param_formats": compiled.param_formats,
        "tensor_maps": [list(m) for m in compiled.tensor_maps],
        "block_threads": compiled.block_threads, "cooperative": compiled.cooperative})


def load_or_compile(kernel, spec):
    """The compiled kernel from the disk cache, or compiled now (and stored). The
    simulator's type check always runs (it is the front end's, not an artifact); a
    compilation asked to dump its stages (``CompileOptions.dump_dir``) does not read the
    cache, so its stages are written. A global the kernel reads that was rebound since its
    first compilation is reported (once per name)."""
    with syntax.deep_trees():       # the cache key's and the compile's walks of the tree
        return _load_or_compile(kernel, spec)


def _load_or_compile(kernel, spec):
    _warn_changed_globals(kernel)
    if spec.target.is_sim:
        # the compiler (Numba) only when a kernel is first simulated: its type check always
        # runs, uncached
        from tilejit.compiler.pipeline import compile_kernel
        return compile_kernel(kernel.source, spec)
    # AMDGPU code objects are not kept on disk yet (they are bytes; compiled each process)
    key = None if cache_dir() is None or spec.target.kind == "amdgpu" else key_of(kernel, spec)
    cached = None if spec.options.dump_dir or key is None else load(kernel, spec, key)
    what = kernel.source.tree.name
    if cached is not None:
        logger.debug("disk cache hit: %s [%s] (key %s)", what, spec.summary(), key[:16])
        return cached
    logger.debug("disk cache %s: %s [%s]", "miss" if key else "not used", what,
                 spec.summary())
    # the compiler, on a cache miss only: a process whose kernels are all cached never
    # imports Numba
    from tilejit.compiler.pipeline import compile_kernel
    compiled = compile_kernel(kernel.source, spec)
    if key is not None:
        store(kernel, spec, compiled, key)
    return compiled

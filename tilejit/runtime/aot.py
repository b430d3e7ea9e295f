"""Ahead-of-time export: a compiled kernel saved to one file and launched later, in a
process that has neither Numba nor llvmlite.

    handle = gemm.compile(a, b, c, arch="sm_90a", block_K=64)   # where tilejit compiles
    handle.save("gemm.tjk")
    ...
    gemm = tilejit.load("gemm.tjk")                             # anywhere with a GPU
    gemm(a, b, c)

The file (JSON) holds the kernel's source text (the function, its lines where they were),
the plain values and modules it reads, and per saved specialization: its description
(argument types, constexprs, shapes it was specialized on, threads, arch, options) and
the compiled artifact (PTX, parameter formats, tensor maps, shared memory, threads),
and a cubin where the saving process has a CUDA device of the kernel's arch: the
driver's own JIT of the PTX (``cuda_driver.link_cubin``), stored in base64 with the arch
it runs on (``cubin_arch``; where there is none, ``cubin_note`` says why). ``load``
rebuilds the kernel from its source, without compiling it: its host program (grid,
``T.empty`` outputs) runs as Python, and a call whose specialization was saved launches
the saved cubin on a device of its arch and the saved PTX elsewhere; any other call is a
ValueError saying which specializations the file has. Several ``save`` calls to one
file add specializations.

A saved kernel is Python source that ``load`` executes: load only files you trust.
Kernels that read functions (a ``@T.macro``, a helper) cannot be saved yet.
"""
from __future__ import annotations

import base64
import importlib
import json
import linecache
import os
import textwrap
import types

from tilejit.compiler.artifact import CompiledKernel
from tilejit.errors import CompileError
from tilejit.language.dtypes import DType, as_dtype
from tilejit.runtime.kernel import KernelFunction, _Loaded
from tilejit.version import __version__

FORMAT = 1
_PLAIN = (bool, int, float, str, type(None))


def _encode(value, name):
    if isinstance(value, DType):
        return {"dtype": value.name}
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, _PLAIN):
        return {"value": value}
    if isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value):
        return {"tuple": list(value)}
    raise ValueError(f"save: the kernel reads {name!r}, a {type(value).__name__}; a saved "
                     "kernel may read plain values (numbers, strings, dtypes, tuples of "
                     "them) and modules only")


def _decode(entry):
    if "dtype" in entry:
        return as_dtype(entry["dtype"])
    if "module" in entry:
        return importlib.import_module(entry["module"])
    if "tuple" in entry:
        return tuple(entry["tuple"])
    return entry["value"]


def _source_of(kernel):
    """The function's text as in its file (decorators dropped) and its first line."""
    source = kernel.source
    fdef = source.tree
    lines = linecache.getlines(source.filename)
    if not lines:
        raise ValueError(f"save: the source of kernel {fdef.name} ({source.filename}) is "
                         "not readable")
    return textwrap.dedent("".join(lines[fdef.lineno - 1:fdef.end_lineno])), fdef.lineno


def save(handle, path: str) -> None:
    """Write (or add to) ``path``: the kernel of ``handle`` and this specialization."""
    kernel, spec = handle.kernel, handle.spec
    if handle.simulated or spec is None:
        raise ValueError("save: compile for CUDA first (kernel.compile(..., target='cuda', "
                         "arch=...)); a simulated kernel has no device code")
    text, first = _source_of(kernel)
    reads = {}
    for read in kernel.source.reads:
        root = read.name.split(".")[0]
        if root not in reads:
            reads[root] = _encode(kernel.source.namespace.get(root, read.root), root)
    compiled = handle.compiled
    entry = {"describe": json.dumps(spec.describe(), sort_keys=True),
             "summary": spec.summary(),
             "compiled": {"name": compiled.name, "ptx": compiled.ptx,
                          "shared_bytes": compiled.shared_bytes,
                          "param_formats": compiled.param_formats,
                          "tensor_maps": [list(m) for m in compiled.tensor_maps],
                          "block_threads": compiled.block_threads,
                          "cooperative": compiled.cooperative}}
    entry["compiled"].update(_cubin(compiled.ptx, spec.target.arch))
    manifest = None
    if os.path.exists(path):
        manifest = _read(path)
        if manifest["source"] != text or manifest["name"] != kernel.__name__:
            raise ValueError(f"save: {path} holds another kernel ({manifest['name']}); "
                             "save this one to another file")
        manifest["specializations"] = [s for s in manifest["specializations"]
                                       if s["describe"] != entry["describe"]]
    manifest = manifest or {
        "format": FORMAT, "tilejit": __version__, "name": kernel.__name__,
        "filename": kernel.source.filename, "first_line": first, "source": text,
        "reads": reads, "arch": spec.target.arch, "fast_math": kernel.fast_math,
        "debug": kernel.debug, "specializations": []}
    manifest["specializations"].append(entry)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, path)


def _cubin(ptx: str, arch: str) -> dict:
    """``{"cubin": base64, "cubin_arch": arch}`` from the driver's JIT of ``ptx`` on
    device 0 when it is of ``arch``, else ``{"cubin": None, "cubin_note": why}``."""
    from tilejit.runtime import cuda_driver     # the driver only when a kernel is saved
    if not cuda_driver.cuda_available():
        return {"cubin": None, "cubin_note": "saved without a CUDA device: PTX only"}
    device_arch = cuda_driver.device_arch(0)
    if device_arch != arch:
        return {"cubin": None, "cubin_note": f"saved on a {device_arch} device, the kernel "
                                             f"is for {arch}: PTX only"}
    cubin = cuda_driver.link_cubin(ptx, 0)
    return {"cubin": base64.b64encode(cubin).decode(), "cubin_arch": arch}


def _read(path):
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"load: cannot read {path}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"load: {path} is not a saved tilejit kernel of format {FORMAT}")
    return manifest


def load(path: str):
    """The kernel saved in ``path``, ready to launch its saved specializations."""
    manifest = _read(path)
    filename = f"<tilejit saved {manifest['name']}: {manifest['filename']}>"
    text = "\n" * (manifest["first_line"] - 1) + manifest["source"]
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"__name__": "tilejit_saved"}
    namespace.update({k: _decode(v) for k, v in manifest["reads"].items()})
    try:
        exec(compile(text, filename, "exec"), namespace)
    except SyntaxError as e:
        raise CompileError(f"load: the saved source does not parse: {e.msg}", filename,
                           e.lineno) from None
    func = namespace[manifest["name"]]
    saved = {}
    for s in manifest["specializations"]:
        c = s["compiled"]
        saved[s["describe"]] = (s["summary"], CompiledKernel(
            c["name"], ptx=c["ptx"], shared_bytes=c["shared_bytes"],
            param_formats=c["param_formats"],
            tensor_maps=[tuple(m) for m in c["tensor_maps"]],
            block_threads=c["block_threads"], cooperative=c.get("cooperative", False)),
            (base64.b64decode(c["cubin"]), c["cubin_arch"]) if c.get("cubin") else None)

    class SavedKernel(KernelFunction):
        """A kernel loaded from a file: launches its saved specializations only."""

        def _compiled(self, spec, device):
            found = saved.get(json.dumps(spec.describe(), sort_keys=True))
            if found is None or spec.target.is_sim:
                have = "; ".join(f"[{summary}]" for summary, _, _ in saved.values())
                raise ValueError(
                    f"{self.__name__} (loaded from {path}): this call needs "
                    f"[{spec.summary()}], which was not saved (saved: {have}); a saved "
                    "kernel launches what was saved, with CUDA tensors of the same dtypes, "
                    "ranks and alignment and the same constexprs")
            entry = self._cache.get((spec, device))
            if entry is None:
                entry = self._cache.setdefault((spec, device), _Loaded(
                    found[1], device, _cubin_for(found[2], device)))
            return entry

        @property
        def saved(self):
            """(summary, CompiledKernel) of each saved specialization."""
            return [(summary, compiled) for summary, compiled, _ in saved.values()]

        @property
        def cubins(self):
            """The arch of each saved specialization's cubin (None: PTX only)."""
            return [cubin[1] if cubin else None for _, _, cubin in saved.values()]

    def _cubin_for(cubin, device):
        """The saved cubin when ``device`` is of its arch, else None (the PTX is loaded)."""
        from tilejit.runtime import cuda_driver     # the driver only once a kernel launches
        if cubin is None or cuda_driver.device_arch(max(device, 0)) != cubin[1]:
            return None
        return cubin[0]

    return SavedKernel(func, target="cuda", arch=manifest["arch"],
                       fast_math=manifest["fast_math"], debug=manifest["debug"])

"""``python -m tilejit``: what is installed and found, the disk cache, compiling a kernel
to PTX without running it.

    python -m tilejit info
    python -m tilejit cache list | cache clear
    python -m tilejit compile examples/gemm.py::matmul --arch sm_90a \\
        --signature "float16[4096,4096] float16[4096,4096] float32[4096,4096]" \\
        --const block_K=64 [--out matmul.ptx] [--dump DIR]

A signature is one entry per run-time parameter, in order, or ``name=entry``: a tensor
``dtype[d0,d1,...]`` (contiguous, 16-byte aligned, as a typical torch tensor), an ``int``
or a ``float`` value. Its tensors own no memory: a compile never reads them.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import sys

import numpy as np

from tilejit.errors import CompileError
from tilejit.options import cache_root
from tilejit.runtime.kernel import KernelFunction
from tilejit.version import __version__

_TENSOR = re.compile(r"^([a-z0-9_]+)\[([0-9, ]*)\]$")
_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
          "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64, "bool": np.bool_}


class UsageError(ValueError):
    """A command line that cannot be carried out (printed as ``error: ...``, exit 2)."""


# -- info -------------------------------------------------------------------------------

def _cache_files(root):
    out = []
    if root and os.path.isdir(root):
        for directory, _, files in os.walk(root):
            out += [os.path.join(directory, f) for f in files]
    return out


# what ``info`` reports the versions of: (label, distribution names tried in order);
# the CUDA bindings ship as cuda-bindings (cuda-python 12.6+ is a meta-package of it)
# and as cuda-python before that
_DISTRIBUTIONS = (("numba", ("numba",)), ("llvmlite", ("llvmlite",)),
                  ("cuda-bindings", ("cuda-bindings", "cuda-python")), ("torch", ("torch",)))


def installed_version(*distributions: str) -> str:
    """The installed version of the first of ``distributions`` found (importlib.metadata:
    nothing is imported), or ``"not installed"``."""
    from importlib import metadata
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def info() -> str:
    lines = [f"tilejit {__version__}",
             f"Python {platform.python_version()} ({platform.python_implementation()}, "
             f"{platform.system()} {platform.machine()})"]
    lines += [f"{label} {installed_version(*names)}" for label, names in _DISTRIBUTIONS]
    try:
        # cuda-bindings may be missing or broken here: reported by info, not fatal
        from tilejit.runtime import cuda_driver
        version = cuda_driver.driver_version()
        available = cuda_driver.cuda_available()
    except Exception as e:      # cuda-bindings missing or broken: say so, do not fail
        version, available, reason = None, False, f"{type(e).__name__}: {e}"
    else:
        reason = "no CUDA driver" if version is None else "cuInit found no device"
    lines.append("CUDA driver: " + (f"{version[0]}.{version[1]}" if version else "no driver"))
    if available:
        count = cuda_driver.device_count()
        lines.append(f"CUDA devices: {count}")
        for i in range(count):
            limits = cuda_driver.device_limits(i)
            lines.append(f"  device {i}: {cuda_driver.device_name(i)}, default arch "
                         f"{cuda_driver.device_arch(i)}, {limits['num_sms']} SMs, shared "
                         f"memory per block up to {limits['max_shared_per_block_optin']} B")
    else:
        lines.append(f"CUDA devices: none ({reason}); kernels run in the simulator")
    root = cache_root()
    if root is None:
        lines.append("disk cache: disabled (TILEJIT_DISABLE_CACHE)")
    else:
        files = _cache_files(root)
        size = sum(os.path.getsize(f) for f in files)
        lines.append(f"disk cache: {root} ({len(files)} files, {size / 1e6:.1f} MB)")
    return "\n".join(lines)


# -- cache ------------------------------------------------------------------------------

def cache_list() -> str:
    root = cache_root()
    if root is None:
        return "disk cache: disabled (TILEJIT_DISABLE_CACHE)"
    rows = []
    for path in sorted(_cache_files(root)):
        name = "?"
        try:
            with open(path) as f:
                payload = json.load(f).get("payload", {})
            name = str(payload.get("name", "?"))
        except (OSError, ValueError, AttributeError, UnicodeDecodeError):
            pass
        rows.append(f"{os.path.getsize(path):>10}  {name:40s}  {os.path.relpath(path, root)}")
    if not rows:
        return f"disk cache: {root} is empty"
    return f"disk cache: {root}\n{'bytes':>10}  {'entry':40s}  file\n" + "\n".join(rows)


def cache_clear() -> str:
    root = cache_root()
    if root is None:
        return "disk cache: disabled (TILEJIT_DISABLE_CACHE); nothing to clear"
    files = _cache_files(root)
    if os.path.isdir(root):
        shutil.rmtree(root)
    return f"disk cache: removed {len(files)} files from {root}"


# -- compile ----------------------------------------------------------------------------

def _load_kernel(target: str):
    if "::" not in target:
        raise UsageError(f"compile: expected FILE::KERNEL, got {target!r}")
    path, name = target.rsplit("::", 1)
    if not os.path.isfile(path):
        raise UsageError(f"compile: no such file {path!r}")
    spec = importlib.util.spec_from_file_location(
        "tilejit_cli_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, KernelFunction):
        found = sorted(k for k, v in vars(module).items() if isinstance(v, KernelFunction))
        raise UsageError(f"compile: {path} has no @tilejit.kernel named {name!r}; its "
                         f"kernels: {', '.join(found) or 'none'}")
    return kernel


def _value(text: str):
    """A signature entry as an argument: a tensor without memory, an int or a float."""
    m = _TENSOR.match(text.strip())
    if m:
        dtype, dims = m.group(1), m.group(2)
        if dtype not in _NUMPY:
            raise UsageError(f"signature: unknown dtype {dtype!r} in {text!r}; expected one "
                             f"of {', '.join(_NUMPY)}")
        shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
        item = np.dtype(_NUMPY[dtype]).itemsize
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * item
                        for i in range(len(shape)))
        # a one-element buffer viewed with the shape's strides: the types are right and
        # no memory is taken (nothing reads it: compile only)
        return np.lib.stride_tricks.as_strided(np.zeros(1, _NUMPY[dtype]), shape, strides)
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    raise UsageError(f"signature: expected dtype[d0,d1,...], an int or a float, got {text!r}")


def _constant(text: str):
    if "=" not in text:
        raise UsageError(f"--const: expected NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    for convert in (int, float):
        try:
            return name, convert(value)
        except ValueError:
            pass
    if value in ("True", "False"):
        return name, value == "True"
    return name, value


def compile_to_ptx(target: str, arch: str, signature: str, consts=(), dump=None) -> str:
    kernel = _load_kernel(target)
    args, kwargs = [], {}
    for entry in signature.split():
        if "=" in entry and not entry.startswith(("=",)) and "[" not in entry.split("=")[0]:
            name, text = entry.split("=", 1)
            kwargs[name] = _value(text)
        else:
            args.append(_value(entry))
    kwargs.update(_constant(c) for c in consts)
    if dump:
        kernel.dump_dir = os.path.abspath(dump)     # CompileOptions.dump_dir, as a value
    return kernel.compile(*args, target="cuda", arch=arch, **kwargs).ptx


# -- the command line -------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tilejit", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, CUDA devices, the disk cache")
    cache = sub.add_parser("cache", help="the disk cache of compiled kernels")
    cache.add_argument("action", choices=("list", "clear"))
    c = sub.add_parser("compile", help="compile FILE::KERNEL to PTX (no GPU needed)")
    c.add_argument("kernel", help="FILE::KERNEL, a @tilejit.kernel in a Python file")
    c.add_argument("--arch", default="sm_90a", help="e.g. sm_80, sm_90a (default sm_90a)")
    c.add_argument("--signature", required=True,
                   help='run-time arguments, e.g. "float16[1024,512] float32[512] n=7"')
    c.add_argument("--const", action="append", default=[], metavar="NAME=VALUE",
                   help="a T.constexpr parameter (repeatable)")
    c.add_argument("--out", help="write the PTX here (default: standard output)")
    c.add_argument("--dump", metavar="DIR", help="also write every compiler stage to DIR")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "info":
            print(info())
        elif args.command == "cache":
            print(cache_list() if args.action == "list" else cache_clear())
        else:
            ptx = compile_to_ptx(args.kernel, args.arch, args.signature, args.const,
                                 args.dump)
            if args.out:
                with open(args.out, "w") as f:
                    f.write(ptx)
                print(f"wrote {args.out} ({len(ptx)} characters of PTX for {args.arch})")
            else:
                sys.stdout.write(ptx)
    except (UsageError, CompileError, TypeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0

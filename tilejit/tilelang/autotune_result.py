"""TileLang's ``AutotuneResult`` (``tilelang.autotuner.param``): the best config of a
tuning, its latency, the reference's, the kernel's source, the prim_func and the compiled
kernel, and its ``save_to_disk`` / ``load_from_disk``.

``result.save_to_disk(path)`` writes a folder, complete or not at all (written beside it
and renamed into place; a complete one already there is kept, as TileLang's):

    best_config.json   the config                 latency.json   latency, ref_latency (ms)
    out_idx.json       the compile's out_idx      function.json  the program factory
    device_kernel.ptx  the kernel's PTX (TileLang writes CUDA C there: device_kernel.cu)

``AutotuneResult.load_from_disk(path, compile_args)`` reads it back (None where there is
no such folder) and compiles ``factory(**config)`` with ``compile_args`` (the saved
out_idx where they give none); the device code comes from tilejit's disk cache where the
saving process compiled it. TileLang pickles its TVM program; tilejit's programs are
Python functions, so the folder names the factory: a function of a module (or a
``functools.partial`` of one with JSON arguments) that the loading process imports. A
factory defined inside another function, or a lambda, is saved with a note, and loading
that folder is a ValueError saying so.
"""
from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

BEST_CONFIG_PATH = "best_config.json"
LATENCY_PATH = "latency.json"
OUT_IDX_PATH = "out_idx.json"
FUNCTION_PATH = "function.json"
DEVICE_KERNEL_PATH = "device_kernel.ptx"
_REQUIRED = (BEST_CONFIG_PATH, LATENCY_PATH, OUT_IDX_PATH, FUNCTION_PATH)


@dataclass
class AutotuneResult:
    """The best config: its latency (ms; None in simulation), the reference program's,
    the kernel's source, the prim_func and the compiled kernel (``factory`` and
    ``compile_args``: how it was made, for ``save_to_disk``)."""
    latency: float | None = None
    config: dict | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Callable | None = None
    kernel: Callable | None = None
    timings: list = field(default_factory=list)
    factory: Callable | None = field(default=None, repr=False)
    compile_args: Any = field(default=None, repr=False)

    def save_to_disk(self, path, verbose: bool = False) -> None:
        """The result as a folder at ``path`` (see the module's text)."""
        path = Path(path)
        if _complete(path):
            return
        try:
            config = json.dumps(self.config)
        except TypeError as e:
            raise TypeError(f"AutotuneResult.save_to_disk: the config {self.config!r} is not "
                            f"JSON ({e})") from None
        out_idx = getattr(self.compile_args, "out_idx", None)
        files = {
            BEST_CONFIG_PATH: config,
            LATENCY_PATH: json.dumps({"latency": self.latency,
                                      "ref_latency": self.ref_latency}),
            OUT_IDX_PATH: json.dumps({"out_idx": list(out_idx) if isinstance(
                out_idx, (list, tuple)) else out_idx}),
            FUNCTION_PATH: json.dumps(factory_reference(self.factory)),
        }
        if self.libcode is not None:
            files[DEVICE_KERNEL_PATH] = self.libcode
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            for name, text in files.items():
                (staging / name).write_text(text)
                if verbose:
                    print(f"AutotuneResult.save_to_disk: wrote {path / name}")
            if path.exists():               # an incomplete folder: replaced
                shutil.rmtree(path)
            os.rename(staging, path)
        except OSError:
            if not _complete(path):         # (another process's complete one is kept)
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    @classmethod
    def load_from_disk(cls, path, compile_args) -> AutotuneResult | None:
        """The result ``save_to_disk`` wrote at ``path``, its kernel compiled with
        ``compile_args``; None where there is no folder."""
        path = Path(path)
        if not path.exists():
            return None
        missing = [n for n in _REQUIRED if not (path / n).is_file()]
        if missing:
            raise ValueError(f"AutotuneResult.load_from_disk: {path} is not a saved result "
                             f"(no {', '.join(missing)})")
        config = json.loads((path / BEST_CONFIG_PATH).read_text())
        latency = json.loads((path / LATENCY_PATH).read_text())
        saved_out_idx = json.loads((path / OUT_IDX_PATH).read_text())["out_idx"]
        reference = json.loads((path / FUNCTION_PATH).read_text())
        factory = _import_factory(reference, path)
        if getattr(compile_args, "out_idx", None) is None and saved_out_idx is not None:
            compile_args = replace(compile_args, out_idx=saved_out_idx)
        program = factory(**{k: v for k, v in config.items() if k != "pass_configs"})
        kernel = compile_args.compile_program(program, config.get("pass_configs"))
        ptx = path / DEVICE_KERNEL_PATH
        return cls(latency=latency["latency"], config=config,
                   ref_latency=latency["ref_latency"],
                   libcode=ptx.read_text() if ptx.is_file() else None, func=program,
                   kernel=kernel, factory=factory, compile_args=compile_args)


def _complete(path: Path) -> bool:
    return path.is_dir() and all((path / n).is_file() for n in _REQUIRED)


def factory_reference(factory) -> dict:
    """How a loading process finds ``factory``: its module and qualified name (and a
    partial's JSON arguments), or a note saying why it cannot."""
    args, keywords = [], {}
    if isinstance(factory, functools.partial):
        args, keywords, factory = list(factory.args), dict(factory.keywords), factory.func
        try:
            json.dumps([args, keywords])
        except TypeError:
            return {"module": None, "why": "it is a functools.partial whose arguments are "
                    "not JSON"}
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if factory is None or module is None or qualname is None:
        return {"module": None, "why": f"it is {type(factory).__name__}, not a function"}
    if "<locals>" in qualname or "<lambda>" in qualname or module == "__main__":
        return {"module": None, "why": f"{qualname} is defined inside a function, a lambda "
                f"or a script's __main__, which another process cannot import"}
    found = sys.modules.get(module)
    for part in qualname.split(".") if found is not None else ():
        found = getattr(found, part, None)
    if found is not factory:
        return {"module": None, "why": f"{module}.{qualname} is not this function there (a "
                f"decorator replaced it)"}
    return {"module": module, "qualname": qualname, "args": args, "keywords": keywords}


def _import_factory(reference: dict, path: Path):
    if reference.get("module") is None:
        raise ValueError(f"AutotuneResult.load_from_disk: {path} holds the config and "
                         f"latencies, not a program factory to compile it with: "
                         f"{reference.get('why')}; build the kernel with "
                         f"factory(**config) (best_config.json)")
    value = importlib.import_module(reference["module"])
    for part in reference["qualname"].split("."):
        value = getattr(value, part)
    if reference["args"] or reference["keywords"]:
        value = functools.partial(value, *reference["args"], **reference["keywords"])
    return value

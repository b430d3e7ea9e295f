"""TileLang's object form of the autotuner: ``tilelang.autotuner.AutoTuner`` and the
records of ``tilelang.autotuner.param``.

    result = (AutoTuner.from_kernel(kernel=factory, configs=configs)
              .set_compile_args(out_idx=[-1], pass_configs={...})
              .set_profile_args(ref_prog=ref, rtol=1e-2, atol=1e-2)
              .run(warmup=3, rep=20))
    result.latency, result.config, result.ref_latency, result.kernel

``factory(**config)`` returns a ``@T.prim_func``; each config's is compiled with the
compile arguments (``tilejit.compile``; a config's own ``"pass_configs"`` entry over
them), run on the inputs (``supply_prog(params)``, else tensors made from the
prim_func's annotations as ``supply_type`` says, else random), its outputs checked against
``ref_prog(*inputs)`` (``rtol``, ``atol``, at most ``max_mismatched_ratio`` of the
elements off; ``manual_check_prog(outputs, reference)`` instead where given;
``skip_check`` leaves them unchecked) and its launch timed (CUDA events, ``warmup`` and
``rep``; a config whose timing would pass ``timeout`` seconds is skipped). The fastest
is the result. Without a CUDA device nothing runs: the first config that compiles (to
PTX, for the device's arch) is the result, with no latency. A config that fails to
compile, to run or the check is skipped with an ``AutotuneWarning``; none left is a
RuntimeError listing why each failed.

Differences from TileLang: the result is not cached on disk by ``run()`` (``@autotune``
is; ``result.save_to_disk(path)`` and ``AutotuneResult.load_from_disk(path, compile_args)``
keep one by hand, ``autotune_result.py``); the profiler backend and grouped or multi-GPU
compilation are accepted and not used; ``execution_backend`` and ``target_host`` likewise.
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from tilejit.runtime.kernel import default_arch
from tilejit.tilelang.autotune_result import (  # noqa: F401 - TileLang's param names
    BEST_CONFIG_PATH, DEVICE_KERNEL_PATH, FUNCTION_PATH, LATENCY_PATH, OUT_IDX_PATH,
    AutotuneResult)
from tilejit.tilelang.tvm_target import check_execution_backend, check_target
from tilejit.tuning.autotune import (AutotuneWarning, check_early_stop, first_line,
                                     skippable_errors, snapshot, timed)
from tilejit.language.compat import missing_attribute, module_getattr


def _hash_fields(obj) -> int:
    """A hash of a record's values (lists and dicts by their text; callables by name)."""
    def plain(v):
        if callable(v):
            return f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', repr(v))}"
        return repr(v)
    return hash(tuple((f.name, plain(getattr(obj, f.name))) for f in dataclasses.fields(obj)))


@dataclass(frozen=True)
class CompileArgs:
    """How each config's prim_func is compiled (``tilejit.compile``'s arguments)."""
    out_idx: list | int | None = None
    execution_backend: str = "auto"
    target: Any = "auto"
    target_host: Any = None
    verbose: bool = False
    pass_configs: dict | None = None

    def __hash__(self):
        return _hash_fields(self)

    def compile_program(self, program, pass_configs=None):
        """``program`` compiled; a config's own ``pass_configs`` over these."""
        from tilejit.tilelang.classic import compile as compile_prim  # the door, on use
        merged = {**(self.pass_configs or {}), **(pass_configs or {})}
        return compile_prim(program, out_idx=self.out_idx, target=self.target,
                            pass_configs=merged or None)


@dataclass(frozen=True)
class ProfileArgs:
    """How each config's kernel is run, checked and timed."""
    warmup: int = 25
    rep: int = 100
    timeout: int = 30
    backend: str = "event"
    supply_type: Any = None
    ref_prog: Callable | None = None
    supply_prog: Callable | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable | None = None
    cache_input_tensors: bool = True
    early_stop: bool = False            # TileLang's: a config whose estimate is past
    early_stop_factor: float = 2.0      # factor × the best so far is not timed in full

    def __post_init__(self):
        check_early_stop(self.early_stop, self.early_stop_factor)

    def stop_ms(self, timed_ms) -> float | None:
        """The estimate past which a config is not timed in full: ``early_stop_factor``
        × the best of ``timed_ms`` (None: time it in full)."""
        best = min((m for m in timed_ms if m is not None), default=None)
        return best * self.early_stop_factor if self.early_stop and best is not None \
            else None

    def __hash__(self):
        return _hash_fields(self)


class AutoTuner:
    """``AutoTuner(fn, configs)``: ``fn(**config)`` returns a ``@T.prim_func``."""

    def __getattr__(self, name):
        raise missing_attribute(self, name, "AutoTuner", "a part of TileLang's AutoTuner "
                                "that tilejit's does not have (its TVM elaboration and "
                                "cache internals)")

    def __init__(self, fn: Callable, configs):
        if not callable(fn):
            raise TypeError(f"AutoTuner: fn must be a function returning a @T.prim_func, "
                            f"got {type(fn).__name__}")
        self.fn = fn
        self.configs = configs
        self.compile_args = CompileArgs()
        self.profile_args = ProfileArgs()
        self._kernel_parameters = None
        self._function_parameters = None

    @classmethod
    def from_kernel(cls, kernel: Callable, configs) -> "AutoTuner":
        return cls(kernel, configs)

    def set_compile_args(self, out_idx=None, target="auto", execution_backend="auto",
                         target_host=None, verbose=False, pass_configs=None) -> "AutoTuner":
        # (each config compiles with them, where a bad one would be that config's failure)
        check_target(target, "AutoTuner.set_compile_args")
        check_execution_backend(execution_backend, "AutoTuner.set_compile_args")
        self.compile_args = CompileArgs(out_idx=out_idx, execution_backend=execution_backend,
                                        target=target, target_host=target_host,
                                        verbose=verbose, pass_configs=pass_configs)
        return self

    def set_profile_args(self, warmup=25, rep=100, timeout=30, supply_type=None,
                         ref_prog=None, supply_prog=None, rtol=1e-2, atol=1e-2,
                         max_mismatched_ratio=0.01, skip_check=False, manual_check_prog=None,
                         cache_input_tensors=False, backend="event") -> "AutoTuner":
        self.profile_args = ProfileArgs(
            warmup=warmup, rep=rep, timeout=timeout, backend=backend,
            supply_type=supply_type, ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol,
            atol=atol, max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
            manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors)
        return self

    def set_kernel_parameters(self, k_parameters, f_parameters) -> None:
        """The decorated function's call (its arguments; its signature's defaults)."""
        self._kernel_parameters = k_parameters
        self._function_parameters = f_parameters

    def generate_cache_key(self, parameters, extra_parameters) -> str | None:
        """A digest of what decides the tuning (the function's source and defaults, the
        configs, the compile and profile arguments), or None when a profile callback
        (``ref_prog``, ``supply_prog``, ``manual_check_prog``) takes part: a function's
        behaviour has no identity a key can hold."""
        p = self.profile_args
        if any(cb is not None for cb in (p.ref_prog, p.supply_prog, p.manual_check_prog)):
            return None
        defaults = [repr(v.default) for v in parameters.values()
                    if v.default is not inspect.Parameter.empty]
        try:
            source = inspect.getsource(self.fn)
        except (OSError, TypeError):
            source = getattr(self.fn, "__qualname__", repr(self.fn))
        payload = json.dumps({
            "defaults": defaults, "extra": repr(extra_parameters), "source": source,
            "configs": repr(self.configs), "kernel": repr(self._kernel_parameters),
            "compile": [repr(getattr(self.compile_args, f.name))
                        for f in dataclasses.fields(self.compile_args)],
            "profile": [repr(getattr(p, f.name)) for f in dataclasses.fields(p)],
        }, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    # -- running ------------------------------------------------------------------------
    def _configs(self) -> list[dict]:
        configs = self.configs
        if callable(configs) and not isinstance(configs, (list, tuple)):
            args, kwargs = self._kernel_parameters or ((), ())
            configs = configs(*args, **dict(kwargs))
        if not isinstance(configs, (list, tuple)) or not configs or not all(
                isinstance(c, dict) for c in configs):
            raise ValueError(f"AutoTuner: configs must be a non-empty list of dicts, got "
                             f"{configs!r:.200}")
        return [dict(c) for c in configs]

    def run(self, warmup: int = 25, rep: int = 100, timeout: int = 180,
            early_stop: bool | None = None, early_stop_factor: float | None = None,
            **ignored) -> AutotuneResult:
        """Tune: each config compiled, checked and timed (``early_stop``: one whose
        estimate is past ``early_stop_factor`` × the best so far is not timed in full,
        TileLang's; default: the profile args')."""
        configs = self._configs()
        name = getattr(self.fn, "__name__", "kernel")
        gpu = _cuda_available() and self.compile_args.target in ("auto", "cuda")
        profile = self.profile_args
        if early_stop is not None or early_stop_factor is not None:
            profile = dataclasses.replace(
                profile, early_stop=profile.early_stop if early_stop is None else early_stop,
                early_stop_factor=profile.early_stop_factor if early_stop_factor is None
                else early_stop_factor)
        bench = _Profile(profile, warmup, rep, timeout) if gpu else None
        skippable = skippable_errors()
        best, timings = None, []
        for config in configs:
            try:
                # TileLang's per-config "pass_configs" entry: compile options, not an
                # argument of fn
                args = {k: v for k, v in config.items() if k != "pass_configs"}
                program = self.fn(**args)
                kernel = self.compile_args.compile_program(program,
                                                           config.get("pass_configs"))
                if bench is None:
                    kernel.get_kernel_source(arch=default_arch())
                    ms, note = None, "compiles (simulation: not timed)"
                else:
                    ms, note = bench.run(kernel, profile.stop_ms(t[1] for t in timings))
            except skippable as e:
                ms, note, kernel, program = None, f"failed: {type(e).__name__}: " \
                    f"{first_line(e)}", None, None
            timings.append((config, ms, note))
            ok = kernel is not None and (ms is not None or bench is None) and \
                not note.startswith(("failed", "results", "skipped"))
            if not ok:
                warnings.warn(f"AutoTuner {name}: config {config} skipped: {note}",
                              AutotuneWarning, stacklevel=2)
                continue
            if best is None or (ms is not None and ms < best[1]):
                best = (config, ms, kernel, program)
            if bench is None:
                break                         # simulation: the first valid config
        if best is None:
            lines = "\n".join(f"  {c}: {note}" for c, _, note in timings)
            raise RuntimeError(f"AutoTuner {name}: no config ran successfully:\n{lines}")
        config, ms, kernel, program = best
        ref_latency = bench.reference_latency() if bench is not None else None
        try:
            libcode = kernel.get_kernel_source()
        except Exception:        # noqa: BLE001 - the source is informative only
            libcode = None
        return AutotuneResult(latency=ms, config=config, ref_latency=ref_latency,
                              libcode=libcode, func=program, kernel=kernel, timings=timings,
                              factory=self.fn, compile_args=self.compile_args)


def _cuda_available() -> bool:
    torch = sys.modules.get("torch")
    try:
        if torch is None:
            import torch
        return bool(torch.cuda.is_available())
    except ImportError:
        return False


class _Profile:
    """One tuning's GPU side: the inputs (made once), the reference outputs, each
    config's check and timing."""

    def __init__(self, args: ProfileArgs, warmup, rep, timeout):
        import torch
        self.torch = torch
        self.args = args
        self.warmup = warmup if warmup is not None else args.warmup
        self.rep = rep if rep is not None else args.rep
        self.timeout = timeout if timeout is not None else args.timeout
        self.inputs = None
        self.reference = None

    def _make_inputs(self, kernel):
        params = [kernel.prim.annotations[n] for i, n in enumerate(kernel.prim.params)
                  if i not in kernel.out_idx]
        if self.args.supply_prog is not None:
            return list(self.args.supply_prog(params))
        if self.args.supply_type is not None:
            from tilejit.tilelang.utils import get_tensor_supply  # torch's helpers, on use
            supply = get_tensor_supply(self.args.supply_type)
            return [supply(p) for p in params]
        from tilejit.tilelang.autotuner import _Bench     # the classic tuner's inputs
        shim = type("Tuner", (), {"__name__": kernel.prim.__name__})()
        return _Bench(shim, None)._make_inputs(kernel)

    def run(self, kernel, stop_ms=None):
        torch = self.torch
        if self.inputs is None:
            self.inputs = self._make_inputs(kernel)
        outputs = kernel(*self.inputs)
        torch.cuda.synchronize()
        outputs = [outputs] if not isinstance(outputs, (tuple, list)) else list(outputs)
        if not self.args.skip_check:
            problem = self._check(outputs)
            if problem:
                return None, f"results differ from the reference: {problem}"
        launch = kernel
        ms, why = timed(lambda: launch(*self.inputs), self.warmup, self.rep, True,
                        self.timeout, stop_ms)
        return ms, (f"skipped: {why}" if why else "ok")

    def _check(self, outputs) -> str | None:
        problem, self.reference = check_outputs(self.args, self.inputs, outputs,
                                                self.reference)
        return problem

    def reference_latency(self) -> float | None:
        if self.args.ref_prog is None or self.inputs is None:
            return None
        ms, _ = timed(lambda: self.args.ref_prog(*self.inputs), self.warmup, self.rep, True,
                      self.timeout)
        return ms


def check_outputs(args: ProfileArgs, inputs, outputs, reference):
    """(None or what differs, the reference outputs): ``outputs`` against
    ``args.ref_prog(*inputs)`` (computed once: ``reference`` is what a previous call
    returned) within rtol/atol, at most ``max_mismatched_ratio`` of the elements off, or
    as ``manual_check_prog(outputs, reference)`` judges (an AssertionError: differ)."""
    if args.ref_prog is None and args.manual_check_prog is None:
        return None, reference
    if reference is None and args.ref_prog is not None:
        ref = args.ref_prog(*inputs)
        reference = [ref] if not isinstance(ref, (tuple, list)) else list(ref)
    if args.manual_check_prog is not None:
        try:
            args.manual_check_prog(outputs, reference)
        except AssertionError as e:
            return first_line(e), reference
        return None, reference
    import torch     # the tensors compared are torch's (a GPU run)
    for index, (got, want) in enumerate(zip(outputs, reference)):
        got = torch.as_tensor(snapshot(got)[1]).double()
        want = torch.as_tensor(snapshot(want)[1]).to(got.device).double()
        if got.shape != want.shape:
            return (f"output {index} has shape {tuple(got.shape)}, expected "
                    f"{tuple(want.shape)}"), reference
        off = ~torch.isclose(got, want, rtol=args.rtol, atol=args.atol, equal_nan=True)
        ratio = off.double().mean().item()
        if ratio > args.max_mismatched_ratio:
            return (f"output {index}: {ratio:.2%} of the elements differ beyond rtol "
                    f"{args.rtol}, atol {args.atol}"), reference
    return None, reference

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.autotuner.param", __name__,
    "of TileLang's autotuner parameters tilejit has CompileArgs, ProfileArgs and AutotuneResult"
    " (its tuning cache is tilejit's own: `python -m tilejit cache`)")

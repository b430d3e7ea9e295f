"""TileLang's ``tilelang.autotuner``: ``@autotune(configs=...)`` stacked above
``@tilejit.jit``, in both of TileLang's styles (``from tilelang.autotuner import
autotune`` and ``@tilelang.autotune`` both work once the imports name tilejit).

- Eager style (``@tilejit.jit def f(A, B, block_M=128, ...)``): calling ``f(a, b)``
  tunes the configs on these arguments (per argument types, shapes, strides and device,
  as ``@tilejit.autotune`` on a ``@tilejit.kernel``: ``tuning.Autotuner``) and returns
  what the program returns, run with the best config.
- Classic style (``@tilejit.jit(out_idx=...)`` on a factory returning a
  ``@T.prim_func``): calling ``matmul(M, N, K)`` tunes the configs for these factory
  arguments and returns the compiled kernel of the best one. Inputs: those given by
  ``with set_autotune_inputs(a, b):``, else random tensors made from the prim_func's
  annotations (which then need static shapes, as in TileLang). ``configs`` may also be
  a function of the factory's arguments returning the list (TileLang's form), and a
  config may carry its own ``"pass_configs"`` (compile options over the program's:
  ``{"block_M": 128, "pass_configs": {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}}``).

``do_not_specialize=["N", ...]``: calls that differ only in those factory arguments reuse
the config tuned first (``_tuner_cache``, as TileLang names it, holds one per call key);
the program is still built for each call's own arguments.

On a GPU each config is run, its results compared with the first valid config's,
and timed with ``tilejit.testing.do_bench`` (CUDA events); the fastest is kept in memory
and on disk (``DiskCache("autotune")``). In simulation (no CUDA device, or tensors in
host memory) nothing is timed: a config is valid when it compiles to PTX (for the
device's arch, else sm_90: the launch checks, tile plan and shared memory limits) and
the first valid config in the list is chosen, deterministically. A config that fails is
skipped with an ``AutotuneWarning``; when none is valid a RuntimeError lists why.

As in TileLang, ``timeout=`` bounds the seconds one config's timing may take (a config
that would take longer is skipped; nothing is timed in simulation), and a call that
passes tuned parameters explicitly is not tuned: ``flashattn(b, h, s, d, block_M=128,
block_N=64)`` runs (or, classic style, returns the kernel compiled) with the values given
and the program's defaults for the others.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import warnings

from tilejit.options import target_override
from tilejit.runtime.kernel import default_arch
from tilejit.runtime.disk_cache import DiskCache, digest, function_fingerprint
from tilejit.tuning.bench import check_count
from tilejit.tuning.autotune import (Autotuner, AutotuneWarning, autotune, check_timeout,
                                     compare_results, cuda_device_name, first_line,
                                     json_config, plain_value, progress,
                                     settled_reference, skippable_errors, timed, snapshot)
from tilejit.tilelang.classic import ClassicJit, unknown_symbols
from tilejit.tilelang.jit import JitFunction, pass_config_options

from tilejit.tilelang import autotuner_class as param
from tilejit.tilelang.autotuner_class import (AutoTuner, AutotuneResult, CompileArgs,
                                              ProfileArgs, check_outputs)
from tilejit.language.compat import module_getattr

# TileLang's ``tilelang.autotuner.param`` (CompileArgs, ProfileArgs, AutotuneResult), by
# both of this module's names (``tilejit.autotuner`` is this module too)
sys.modules[__name__ + ".param"] = param
sys.modules["tilejit.autotuner.param"] = param

# ``autotune`` is tuning's: it takes a @tilejit.kernel, or either style of @tilejit.jit
__all__ = ["autotune", "set_autotune_inputs", "get_autotune_inputs", "Autotuner", "AutotuneWarning",
           "EagerAutotuner", "ClassicAutotuner", "AutoTuner", "AutotuneResult",
           "CompileArgs", "ProfileArgs", "param"]

SIMULATION_NOTE = "valid: compiles (simulation: not timed, the first valid config is chosen)"
NOT_TRIED = "not tried (simulation): a config before it is valid"
_INPUTS = threading.local()


@contextlib.contextmanager
def set_autotune_inputs(*tensors):
    """``with set_autotune_inputs(a, b[, c]):`` the tensors a classic-style autotuned
    factory runs its configs on (the inputs, or all the prim_func's tensors)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    outer = getattr(_INPUTS, "tensors", None)
    _INPUTS.tensors = tuple(tensors)
    try:
        yield
    finally:
        _INPUTS.tensors = outer


def get_autotune_inputs():
    """The tensors of the innermost ``with set_autotune_inputs(...)`` (a tuple), or
    None outside one."""
    return getattr(_INPUTS, "tensors", None)


def _ptx_arch() -> str:
    return default_arch()


def _skipped(name, config, note):
    warnings.warn(f"tilejit.autotune {name}: config {config} skipped: {note}",
                  AutotuneWarning, stacklevel=4)


def for_program(program, configs, warmup, rep, key, timeout=None, **profile):
    """The autotuner of a ``@tilejit.jit`` program, or None for anything else."""
    if isinstance(program, JitFunction):
        if {k for k in profile if k != "cache_input_tensors"}:
            raise TypeError(f"@tilejit.autotune over the eager-style {program.__name__}: "
                            f"{', '.join(sorted(profile))} apply to the classic style (a "
                            f"factory returning a @T.prim_func)")
        if callable(configs) and not isinstance(configs, (list, tuple)):
            raise ValueError(f"@tilejit.autotune over the eager-style {program.__name__}: "
                             "configs must be a list of dicts (a function returning them "
                             "is the classic style's form)")
        return EagerAutotuner(program, configs, warmup=warmup, rep=rep, key=key,
                              timeout=timeout)
    if isinstance(program, ClassicJit):
        if key:
            raise ValueError(f"@tilejit.autotune over the classic-style {program.__name__}: "
                             "key does not apply (every factory argument selects the "
                             "tuned config)")
        return ClassicAutotuner(program, configs, warmup=warmup, rep=rep, timeout=timeout,
                                **profile)
    return None


class EagerAutotuner(Autotuner):
    """An eager-style ``@tilejit.jit`` program, tuned per call signature; on a GPU as
    ``tuning.Autotuner``, in simulation the first config that compiles."""

    def _tune(self, sig, args, kwargs) -> dict:
        if sig[1] != "sim":
            return super()._tune(sig, args, kwargs)
        arch, skippable = _ptx_arch(), skippable_errors()
        timings, chosen = [], None
        update, close = progress(self.__name__, len(self.configs))
        try:
            for index, config in enumerate(self.configs):
                if chosen is not None:
                    timings.append((config, None, NOT_TRIED))
                    update(index, config, NOT_TRIED)
                    continue
                try:
                    self.kernel.compile(*args, **kwargs, **config, arch=arch)
                    chosen, note = index, SIMULATION_NOTE
                except skippable as e:
                    note = f"failed: {type(e).__name__}: {first_line(e)}"
                    _skipped(self.__name__, config, note)
                timings.append((config, None, note))
                update(index, config, note)
        finally:
            close()
        self.timings = timings
        if chosen is None:
            lines = "\n".join(f"  {c}: {note}" for c, _, note in timings)
            raise RuntimeError(f"tilejit.autotune {self.__name__}: no config compiled:\n"
                               f"{lines}")
        config = self.configs[chosen]
        self._best[sig] = config
        self._store.store(self._disk_key(sig), {
            "config": json_config(config), "index": chosen,
            "times_ms": [None] * len(self.configs)})
        return config


class ClassicAutotuner:
    """A classic-style ``@tilejit.jit`` factory, tuned per factory arguments: calling it
    returns the compiled kernel of the best config. ``best_config`` and ``timings``
    ([(config, ms or None, note)]) describe the last tuning."""

    def __init__(self, program, configs, warmup: int = 25, rep: int = 100, timeout=None,
                 do_not_specialize=(), **profile):
        self.program = program
        # TileLang's run-and-check options (ProfileArgs); cache_input_tensors: the
        # inputs are made once per tuning anyway
        self.profile = ProfileArgs(**profile)
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.params = list(inspect.signature(program.factory).parameters)
        self.__name__ = program.__name__
        self.__wrapped__ = program
        self.warmup = check_count("warmup", warmup, 0)
        self.rep = check_count("rep", rep, 1)
        self.timeout = check_timeout(timeout)
        self._configs_of = configs if callable(configs) else None
        self.configs = None if self._configs_of else self._checked(configs)
        self.best_config: dict | None = None
        self._latency: dict = {}        # tuning key (or call) -> the best config's ms
        self._chosen_ms = None
        self.timings: list = []
        self._best: dict = {}
        # TileLang's ``_tuner_cache``: per call (the factory's arguments, those named by
        # ``do_not_specialize`` left out), the config it runs with; a call with the same
        # key reuses it without looking for inputs or the disk cache (the program is
        # still built for the call's own arguments)
        self._tuner_cache: dict = {}
        self._lock = threading.Lock()
        self._store = DiskCache("autotune")
        self._fingerprint = None

    def __repr__(self):
        return f"<tilejit.autotune {self.__name__} (classic)>"

    def _configs_for(self, args, kwargs):
        """TileLang's ``configs=get_configs``: called with the factory arguments it names
        (all of them when it takes ``**kwargs``)."""
        named = inspect.signature(self.program.factory).bind_partial(*args, **kwargs).arguments
        params = inspect.signature(self._configs_of).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return self._configs_of(**named)
        return self._configs_of(**{k: v for k, v in named.items() if k in params})

    def _checked(self, configs) -> list:
        if not isinstance(configs, (list, tuple)) or not configs:
            raise ValueError(f"@tilejit.autotune configs: expected a non-empty list of "
                             f"dicts, got {configs!r:.200}")
        for config in configs:
            if not isinstance(config, dict):
                raise ValueError(f"@tilejit.autotune configs: each config is a dict of "
                                 f"{self.__name__}'s parameters, got {config!r:.200}")
            extra = config.get("pass_configs", {})
            if not isinstance(extra, dict):
                raise ValueError(f"@tilejit.autotune config {config!r:.200}: pass_configs: "
                                 f"expected a dict of PassConfigKey values, got "
                                 f"{type(extra).__name__}")
            pass_config_options(dict(extra))       # unknown keys: as @tilejit.jit's
            for name in (n for n in config if n not in self.params and n != "pass_configs"):
                raise ValueError(f"@tilejit.autotune config {config!r}: {name!r} is not a "
                                 f"parameter of {self.__name__} (parameters: "
                                 f"{', '.join(self.params)})")
        return [dict(c) for c in configs]

    def __call__(self, *args, **kwargs):
        kwargs.pop("__return_kernel", None)     # TileLang's; the kernel is what returns
        configs = self.configs or self._checked(self._configs_for(args, kwargs))
        tuned = {n for c in configs for n in c if n != "pass_configs"}
        given = list(self.params[:len(args)]) + list(kwargs)
        inputs = getattr(_INPUTS, "tensors", None)
        device = self._device(inputs)
        call = self._call_key(args, kwargs, device)
        if any(n in tuned for n in given):
            # TileLang's rule: tuned values given explicitly skip the tuning, and the
            # factory compiles with them (its defaults for the others); the call is
            # recorded, never read back (its values are the call's own)
            if call is not None:
                self._tuner_cache.setdefault(("explicit",) + call, {})
            return self.program(*args, **kwargs)
        if call is not None and self._tuner_cache.get(call) in configs:
            # (a config list made per call, which a do_not_specialize argument may change,
            # has to still hold it)
            self.best_config = self._tuner_cache[call]
            return self._tuned(self._run(self.best_config, args, kwargs), call)
        key = self._key(configs, args, kwargs, inputs, device)
        with self._lock:
            config = self._best.get(key) or self._load(key, configs)
            if config is None:
                config = self._tune(configs, args, kwargs, inputs, device)
                self._best[key] = config
                self._latency[key] = self._chosen_ms
                if not self._callbacks():
                    self._store.store(key, {"config": json_config(config),
                                            "index": configs.index(config),
                                            "latency": self._chosen_ms})
        self.best_config = config
        if call is not None:
            self._tuner_cache[call] = config
            self._latency[call] = self._latency.get(key)
        return self._tuned(self._run(config, args, kwargs), key)

    def _tuned(self, kernel, key):
        """The kernel of the best config with TileLang's attributes of a tuned kernel:
        ``config``, ``latency`` (its time in ms on the GPU; NaN in simulation, where
        nothing is timed) and ``ref_latency`` (None: no reference program is timed)."""
        latency = self._latency.get(key)
        kernel.config = dict(self.best_config)
        kernel.latency = float("nan") if latency is None else latency
        kernel.ref_latency = None
        return kernel

    def _call_key(self, args, kwargs, device):
        """The call's key in ``_tuner_cache``: its factory arguments by name (defaults
        applied), less ``do_not_specialize``'s, and where the configs run; None when they
        cannot key a dict."""
        try:
            bound = inspect.signature(self.program.factory).bind(*args, **kwargs)
        except TypeError:
            return None                     # the factory's own error, at the call
        bound.apply_defaults()
        key = (device,) + tuple(sorted((k, v) for k, v in bound.arguments.items()
                                       if k not in self.do_not_specialize))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _run(self, config, args, kwargs):
        """The program of ``config``: its parameters, and its own ``"pass_configs"`` (a
        TileLang config may carry them) over the program's."""
        params = {k: v for k, v in config.items() if k != "pass_configs"}
        kernel = self.program.with_pass_configs(config.get("pass_configs"))(
            *args, **kwargs, **params)
        if not hasattr(kernel, "_specs"):
            raise TypeError(f"@autotune of {self.__name__}: it gives a lazy @T.prim_func "
                            f"(parameters annotated in its body), which the tuner cannot "
                            f"size and time yet (not supported); annotate its parameters in "
                            f"the signature, T.Tensor((M, N), dtype)")
        return kernel

    # -- where and under which key ------------------------------------------------------
    def _device(self, inputs) -> str:
        """"sim", or "cuda:<arch>:<name>" of the device the configs run on."""
        torch = sys.modules.get("torch")
        if target_override() == "sim" or self.program.target == "sim":
            return "sim"        # (CUDA tensors too: simulated on host copies, not timed)
        if inputs:
            on_cuda = [t for t in inputs if torch is not None and isinstance(t, torch.Tensor)
                       and t.is_cuda]
            if not on_cuda:
                return "sim"
            index = on_cuda[0].get_device()
        else:
            try:
                import torch
            except ImportError:
                return "sim"
            if not torch.cuda.is_available():
                return "sim"
            index = torch.cuda.current_device()
        return f"cuda:{index}:{cuda_device_name(index)}"

    def _key(self, configs, args, kwargs, inputs, device) -> str:
        if self._fingerprint is None:
            self._fingerprint = function_fingerprint(self.program.factory)
        shapes = [(str(getattr(t, "dtype", "")), tuple(getattr(t, "shape", ())))
                  for t in (inputs or ())]
        named = inspect.signature(self.program.factory).bind_partial(*args, **kwargs).arguments
        selecting = {k: v for k, v in named.items() if k not in self.do_not_specialize}
        p = self.profile
        checks = (p.skip_check, repr(p.supply_type), p.rtol, p.atol, p.max_mismatched_ratio)
        return digest("tilejit-autotune-classic", self._fingerprint,
                      tuple(plain_value(c) for c in configs), plain_value(selecting),
                      plain_value(checks), str(self.program.out_idx),
                      device.split(":", 2)[-1], plain_value(shapes))

    def _callbacks(self) -> bool:
        """A profile callback (ref_prog, supply_prog, manual_check_prog) takes part: its
        behaviour has no identity a disk key can hold, so nothing is stored or loaded."""
        p = self.profile
        return any(cb is not None for cb in (p.ref_prog, p.supply_prog, p.manual_check_prog))

    def _load(self, key, configs) -> dict | None:
        if self._callbacks():
            return None
        payload = self._store.load(key)
        if payload is None:
            return None
        index = payload.get("index")
        if (not isinstance(index, int) or not 0 <= index < len(configs)
                or json_config(configs[index]) != payload.get("config")):
            return None
        self.timings = [(c, None, "from the disk cache") for c in configs]
        latency = payload.get("latency")
        self._latency[key] = latency if isinstance(latency, (int, float)) else None
        return configs[index]

    # -- tuning -------------------------------------------------------------------------
    def _tune(self, configs, args, kwargs, inputs, device) -> dict:
        skippable = skippable_errors()
        bench = _Bench(self, inputs) if device != "sim" else None
        arch = _ptx_arch()
        timings, chosen = [], None
        update, close = progress(self.__name__, len(configs))
        try:
            for index, config in enumerate(configs):
                if bench is None and chosen is not None:
                    timings.append((config, None, NOT_TRIED))
                    update(index, config, NOT_TRIED)
                    continue
                ms, valid = None, False
                try:
                    kernel = self._run(config, args, kwargs)
                    if bench is None:
                        # the inputs and sizes the GPU's timing would need, also in
                        # simulation (which is never kinder than the GPU)
                        if inputs is None:
                            _check_inputs_can_be_made(self.__name__, kernel, self.profile)
                        kernel._specs(inputs, placeholders=False)
                        kernel.get_kernel_source(arch=arch, tensors=inputs)
                        chosen, valid, note = index, True, SIMULATION_NOTE
                    else:
                        ms, note = bench.run(kernel, config, self.profile.stop_ms(
                            t[1] for t in timings))
                        valid = ms is not None
                except MissingInputsError:
                    raise                     # the tuning's inputs, not this config
                except skippable as e:
                    note = f"failed: {type(e).__name__}: {first_line(e)}"
                if not valid:
                    _skipped(self.__name__, config, note)
                timings.append((config, ms, note))
                update(index, config, f"{ms:.4f} ms" if ms is not None else note)
        finally:
            close()
            if bench is not None:
                bench.restore()
        self.timings = timings
        if bench is not None:
            valid = [(ms, i) for i, (_, ms, _) in enumerate(timings) if ms is not None]
            chosen = min(valid)[1] if valid else None
        if chosen is None:
            lines = "\n".join(f"  {c}: {note}" for c, _, note in timings)
            raise RuntimeError(f"tilejit.autotune {self.__name__}: no config ran "
                               f"successfully:\n{lines}")
        self._chosen_ms = timings[chosen][1]
        return configs[chosen]


def _check_inputs_can_be_made(tuner: str, kernel, profile) -> None:
    """The tuning's inputs are made (random tensors of the annotations' shapes) unless
    the profile supplies them: a MissingInputsError naming set_autotune_inputs for a
    scalar input or one of symbolic extents, which nothing can make."""
    if profile is not None and (profile.supply_prog is not None
                                or profile.supply_type is not None):
        return
    prim, out = kernel.prim, kernel.out_idx
    for i, name in enumerate(prim.params):
        ann = prim.annotations[name]
        if i in out:
            continue
        if getattr(ann, "scalar", False):
            raise MissingInputsError(f"tilejit.autotune {tuner}: input {name!r} is a scalar "
                                     f"({ann.dtype.name}); give the inputs with `with "
                                     f"set_autotune_inputs(...)`")
        symbols = unknown_symbols(ann.shape, {})
        if symbols:
            raise MissingInputsError(f"tilejit.autotune {tuner}: {name} has symbolic "
                                     f"extent(s) {', '.join(symbols)}; tuning needs inputs of "
                                     f"real sizes: give them with `with "
                                     f"set_autotune_inputs(...)`")


class MissingInputsError(ValueError):
    """The tuning cannot make its inputs (a scalar input with none given): no config can
    run, so it is raised, not a config's failure to skip."""


class _Bench:
    """The GPU side of classic tuning: the inputs (given, or random from the first
    kernel's annotations), each config's results checked against the first valid one's,
    and the launch alone timed (outputs allocated once)."""

    def __init__(self, tuner: ClassicAutotuner, inputs):
        import torch
        self.torch = torch
        self.tuner = tuner
        self.inputs = list(inputs) if inputs else None
        self.originals = None
        self.reference = self.reference_config = None

    def _make_inputs(self, kernel):
        torch, prim, out = self.torch, kernel.prim, kernel.out_idx
        profile = getattr(self.tuner, "profile", None)
        params = [prim.annotations[n] for i, n in enumerate(prim.params) if i not in out]
        if profile is not None and profile.supply_prog is not None:
            return list(profile.supply_prog(params))
        if profile is not None and profile.supply_type is not None:
            from tilejit.tilelang.utils import get_tensor_supply  # torch's helpers, on use
            supply = get_tensor_supply(profile.supply_type)
            return [supply(p) for p in params]
        _check_inputs_can_be_made(self.tuner.__name__, kernel, profile)
        tensors = []
        for i, name in enumerate(prim.params):
            if i in out:
                continue
            ann = prim.annotations[name]
            dtype = ann.dtype.as_torch()
            if dtype.is_floating_point:
                t = torch.randn(ann.shape, device="cuda").to(dtype)
            elif dtype == torch.bool:
                t = torch.randint(0, 2, ann.shape, device="cuda").bool()
            else:
                low = 0 if ann.dtype.name.startswith("u") else -4
                t = torch.randint(low, 5, ann.shape, device="cuda", dtype=dtype)
            tensors.append(t)
        return tensors

    def restore(self):
        for tensor, original in zip(self.inputs or (), self.originals or ()):
            if original is not None:
                tensor.copy_(original)

    def _outputs(self, kernel):
        """(the results, every argument) of one launch of ``kernel`` on the inputs as
        they were first."""
        torch = self.torch
        self.restore()
        params, out_idx = kernel.prim.params, kernel.out_idx
        outputs = kernel(*self.inputs)
        torch.cuda.synchronize()
        if len(self.inputs) == len(params):
            full = list(self.inputs)
            return [full[i] for i in getattr(kernel, "out_order", out_idx)] or full, full
        results = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        # (returned in the order out_idx names them)
        produced = dict(zip(getattr(kernel, "out_order", out_idx), results))
        it = iter(self.inputs)
        full = [produced[i] if i in produced else next(it) for i in range(len(params))]
        return results, full

    def run(self, kernel, config, stop_ms=None):
        """(milliseconds or None, note) of one config's kernel (``stop_ms``: TileLang's
        early stop, ``autotune.timed``)."""
        torch = self.torch
        if self.inputs is None:
            self.inputs = self._make_inputs(kernel)
        if self.originals is None:        # scalars among the inputs stay as given
            self.originals = [t.detach().clone() if isinstance(t, torch.Tensor) else None
                              for t in self.inputs]
        out_idx = kernel.out_idx
        results, full = self._outputs(kernel)
        profile = self.tuner.profile
        if profile.ref_prog is not None or profile.manual_check_prog is not None:
            if not profile.skip_check:
                inputs = [t for i, t in enumerate(full) if i not in out_idx]
                problem, self.ref_outputs = check_outputs(profile, inputs, results,
                                                          getattr(self, "ref_outputs", None))
                if problem:
                    return None, f"results differ from the reference: {problem}"
        elif not profile.skip_check:
            results = [snapshot(r) for r in results]
            if self.reference is None:
                again = [snapshot(r) for r in self._outputs(kernel)[0]]
                self.reference = settled_reference(results, again)
                self.reference_config = config
            else:
                problem = compare_results(self.reference, results)
                if problem:
                    return None, (f"results differ from config {self.reference_config}: "
                                  f"{problem}")
        launch = kernel.kernel
        ms, why = timed(lambda: launch(*full), self.tuner.warmup, self.tuner.rep, True,
                        self.tuner.timeout, stop_ms)
        return ms, why or "ok"


# TileLang's names this module does not have: an error naming them (``compat.py``)
# TileLang's autotuner is a package: its submodules tilejit lacks are refused too
__path__ = []
__getattr__ = module_getattr(
    "tilelang.autotuner", __name__,
    "of TileLang's autotuner tilejit has autotune, AutoTuner, set/get_autotune_inputs and "
    "autotuner.param's CompileArgs, ProfileArgs and AutotuneResult")

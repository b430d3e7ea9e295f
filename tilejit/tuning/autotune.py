"""``@tilejit.autotune``: pick the fastest of several constexpr configs of a kernel per
(argument types, shapes, strides, device), check each config's results against the
first valid one, and keep the choice in memory and on disk (``DiskCache("autotune")``)."""
from __future__ import annotations

import functools
import json
import numbers
import statistics
import sys
import threading
import time
import warnings

import numpy as np

from tilejit.runtime.disk_cache import DiskCache, digest, function_fingerprint
from tilejit.errors import CompileError
from tilejit.options import target_override
from tilejit.tuning.bench import check_count, do_bench, event_times
from tilejit.tuning.precompile import default_workers, precompile


class AutotuneWarning(UserWarning):
    """A config was skipped: it failed to compile or launch, or its results differ."""


# TileLang's options of @autotune that say how configs are run and checked; the
# classic style (a factory returning a @T.prim_func) takes them (tilelang/autotuner.py)
PROFILE_OPTIONS = ("supply_type", "supply_prog", "ref_prog", "rtol", "atol",
                   "max_mismatched_ratio", "skip_check", "manual_check_prog",
                   "cache_input_tensors", "do_not_specialize", "early_stop",
                   "early_stop_factor")


def autotune(configs, warmup: int = 25, rep: int = 100, key=None, timeout=100,
             compile_workers=None, **profile):
    """Decorator factory, stacked above ``@tilejit.kernel`` or ``@tilejit.jit`` (either
    TileLang style: ``autotuner.py``). ``configs``: a non-empty list of dicts of the
    kernel's constexpr parameters. ``key``: parameter names whose values (not only
    types) also select the tuned config, e.g. a scalar size. ``timeout``: seconds the
    timing of one config may take (TileLang's meaning); a config that would take longer
    is skipped with an ``AutotuneWarning`` (100 by default, as TileLang's; None, or 0 or
    less: no limit).
    ``compile_workers``: processes that compile the configs before they are timed on a
    GPU (``precompile.py``; None: the CPUs this process may use; 1: one by one).

    A call that passes any tuned parameter explicitly is not tuned (as in TileLang):
    the kernel runs with the values given, its defaults for the others."""
    timeout = check_timeout(timeout)
    compile_workers = check_workers(compile_workers)
    unknown = sorted(set(profile) - set(PROFILE_OPTIONS))
    if unknown:
        raise TypeError(f"autotune() got unexpected keyword argument(s) {', '.join(unknown)}"
                        f" (its options: warmup, rep, key, timeout, compile_workers, "
                        f"{', '.join(PROFILE_OPTIONS)})")

    def wrap(kernel):
        # a program of another front door (TileLang's @tilejit.jit) says how it is tuned
        make = getattr(kernel, "make_autotuner", None)
        if make is not None:
            return make(configs, warmup=warmup, rep=rep, key=key, timeout=timeout, **profile)
        if {k for k in profile if k != "cache_input_tensors"}:
            raise TypeError(f"@tilejit.autotune {getattr(kernel, '__name__', kernel)}: "
                            f"{', '.join(sorted(profile))} apply to a classic-style "
                            f"@tilejit.jit factory (returning a @T.prim_func), not here")
        return Autotuner(kernel, configs, warmup=warmup, rep=rep, key=key, timeout=timeout,
                         compile_workers=compile_workers)
    return wrap


def check_workers(workers):
    """``compile_workers``: None (the CPUs this process may use) or a positive int."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"@tilejit.autotune compile_workers: expected None or a positive "
                         f"int, got {workers!r}")
    return workers


def check_early_stop(early_stop, factor) -> None:
    """TileLang's: ``early_stop_factor`` at least 1 (a config within it of the best is
    timed in full)."""
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise ValueError(f"early_stop_factor must be a number >= 1.0, got {factor!r}")
    if early_stop and factor < 1.0:
        raise ValueError(f"early_stop_factor must be >= 1.0, got {factor}")


def check_timeout(timeout):
    """None (no limit) or a positive number of seconds; TileLang's 0 or less is no
    limit."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise ValueError(f"@tilejit.autotune timeout: expected seconds (a number) or None, "
                         f"got {timeout!r}")
    return float(timeout) if timeout > 0 else None


def _wall(run, cuda: bool) -> float:
    torch = sys.modules.get("torch") if cuda else None
    start = time.perf_counter()
    run()
    if torch is not None:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def timed(run, warmup: int, rep: int, cuda: bool, timeout, stop_ms=None) -> tuple:
    """(median ms, None) of ``run``, or (None, why) when timing it takes longer than
    ``timeout`` seconds: one run is timed first and the config skipped when the whole
    timing would take longer, else skipped when it did. With ``stop_ms`` (TileLang's
    early stop) a first run slower than it is the config's time, not timed further."""
    if stop_ms is not None:
        # measured as the best's time was (CUDA events after the L2 flush: the kernel's
        # time, not the host's launch and synchronize), the median of three
        estimate = statistics.median(event_times(run, 0, 3, True, 0.0)) if cuda \
            else _wall(run, cuda) * 1e3
        if estimate > stop_ms:
            return estimate, None
    if timeout is None:
        return do_bench(run, warmup, rep, cuda=cuda), None
    estimate = _wall(run, cuda) * (warmup + rep)
    if estimate > timeout:
        return None, (f"timed out: its {warmup + rep} timed runs would take about "
                      f"{estimate:.3g} s, more than timeout={timeout:g} s")
    start = time.perf_counter()
    ms = do_bench(run, warmup, rep, cuda=cuda)
    elapsed = time.perf_counter() - start
    if elapsed > timeout:
        return None, (f"timed out: timing it took {elapsed:.3g} s, more than "
                      f"timeout={timeout:g} s")
    return ms, None


def plain_value(value):
    """Hashable, digestable, JSON-friendly form of a config or argument value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(plain_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), plain_value(v)) for k, v in value.items()))
    name, bits = getattr(value, "name", None), getattr(value, "bits", None)
    if isinstance(name, str) and isinstance(bits, int):
        return f"dtype:{name}"
    return f"repr:{value!r}"


def json_config(config: dict) -> dict:
    return json.loads(json.dumps({k: plain_value(v) for k, v in config.items()}))


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def skippable_errors() -> tuple:
    """What a config's run may raise and be skipped for (a tuning run fails only when
    every config does): it does not compile, its launch is invalid, it divides by zero
    on the host (a tile size of 0), the simulator finds it reads out of bounds."""
    errors = (CompileError, ValueError, ZeroDivisionError, IndexError)
    try:  # the driver (cuda.bindings) when a tuning run starts, not at import; may fail
        from tilejit.runtime.cuda_driver import CudaError
    except Exception:  # the driver bindings do not import
        return errors
    return errors + (CudaError,)


@functools.lru_cache(maxsize=None)
def cuda_device_name(index: int) -> str:
    # the driver (cuda.bindings) only when a tuning result is keyed on a CUDA device
    from tilejit.runtime import cuda_driver
    torch = sys.modules.get("torch")
    name = torch.cuda.get_device_name(index) if torch and torch.cuda.is_available() else "?"
    return f"{cuda_driver.device_arch(index)}:{name}"


def _describe(value, by_value: bool):
    """(descriptor, CUDA device index or None) of one argument for the tuning key."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        cuda = value.get_device() if value.is_cuda else None
        return ("tensor", str(value.dtype), tuple(value.shape), tuple(value.stride()),
                str(value.device)), cuda
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.strides, "cpu"), None
    if hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__"):
        kind, index = getattr(value, "__dlpack_device__", lambda: (2, 0))()
        return ("array", type(value).__name__, str(getattr(value, "dtype", None)),
                plain_value(getattr(value, "shape", None)),
                plain_value(getattr(value, "strides", None)),
                kind), (index if kind == 2 else None)   # 2: kDLCUDA
    if not by_value and isinstance(value, (bool, int, float)):
        return ("scalar", type(value).__name__), None
    return ("value", plain_value(value)), None


def snapshot(value):
    """(dtype name, a copy of ``value``): a torch tensor stays a tensor where it lives (a
    GPU result is compared on the GPU: numpy's float16 arithmetic took ~2 s a config for
    a 4096² result on the H200's host), anything else a numpy array."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return str(value.dtype).replace("torch.", ""), value.detach().clone()
    array = np.array(value, copy=True)
    return array.dtype.name, array


def _close(name, ref, new):
    """(elements that differ, elements): floats within 1e-2 (half types) or 1e-4, NaN
    equal to NaN; others exactly."""
    torch = sys.modules.get("torch")
    tol = 1e-2 if name in ("float16", "bfloat16") else 1e-4
    if torch is not None and isinstance(ref, torch.Tensor):
        if ref.is_floating_point() or ref.is_complex():
            wide = torch.complex128 if ref.is_complex() else torch.float32
            close = torch.isclose(new.to(wide), ref.to(wide), rtol=tol, atol=tol,
                                  equal_nan=True)
        else:
            close = new == ref
        return int(close.numel() - close.sum().item()), close.numel()
    if ref.dtype.kind in "fc":
        wide = np.complex128 if ref.dtype.kind == "c" else np.float32
        close = np.isclose(new.astype(wide), ref.astype(wide), rtol=tol, atol=tol,
                           equal_nan=True)
    else:
        close = new == ref
    return int(close.size - np.count_nonzero(close)), close.size


def compare_results(reference: list, results: list) -> str | None:
    """None when ``results`` match ``reference``, else what differs; a reference entry
    of None is not compared (``settled_reference``)."""
    if len(reference) != len(results):
        return f"{len(results)} results, the reference has {len(reference)}"
    for index, (kept, (_, new)) in enumerate(zip(reference, results)):
        if kept is None:
            continue
        name, ref = kept
        if tuple(ref.shape) != tuple(new.shape):
            return (f"result {index} has shape {tuple(new.shape)}, the reference "
                    f"{tuple(ref.shape)}")
        bad, size = _close(name, ref, new)
        if bad:
            return f"result {index}: {bad} of {size} elements differ"
    return None


def settled_reference(first: list, again: list) -> list:
    """The reference results of a config run twice: a result the two runs do not agree on
    (memory the kernel never writes, such as a T.empty output it leaves alone when a flag
    is off) is None, not compared: other configs would differ in its garbage alone."""
    return [None if compare_results([a], [b]) else a for a, b in zip(first, again)]


def progress(name: str, total: int):
    """An update(index, config, text) and a close(): a tqdm bar, else a stderr line each."""
    try:
        from tqdm import tqdm
    except ImportError:
        def update(index, config, text):
            print(f"tilejit.autotune {name} [{index + 1}/{total}] {config}: {text}",
                  file=sys.stderr, flush=True)
        return update, lambda: None
    bar = tqdm(total=total, desc=f"autotune {name}", file=sys.stderr, leave=False)

    def update(index, config, text):
        bar.set_postfix_str(f"{config}: {text}"[:80])
        bar.update(1)
    return update, bar.close


class Autotuner:
    """An autotuned kernel: call it like the kernel. ``best_config`` is the config chosen
    by the last call, ``timings`` the last tuning's [(config, ms or None, note)]."""

    def __init__(self, kernel, configs, warmup: int = 25, rep: int = 100, key=None,
                 timeout=None, compile_workers=None):
        source = getattr(kernel, "source", None)
        if not hasattr(source, "constexpr_params"):
            raise TypeError("@tilejit.autotune applies to a @tilejit.kernel or a "
                            "@tilejit.jit program (stack it above @tilejit.kernel or "
                            f"@tilejit.jit); got {kernel!r:.80}")
        if not isinstance(configs, (list, tuple)) or not configs:
            raise ValueError(f"@tilejit.autotune configs: expected a non-empty list of "
                             f"dicts, got {configs!r:.200}")
        allowed = list(source.constexpr_params)
        for config in configs:
            if not isinstance(config, dict):
                raise ValueError(f"@tilejit.autotune configs: each config is a dict of "
                                 f"constexpr values, got {config!r:.200}")
            for name in (n for n in config if n not in allowed):
                raise ValueError(
                    f"@tilejit.autotune config {config!r}: {name!r} is not a constexpr "
                    f"parameter of {kernel.__name__} (constexpr parameters: "
                    f"{', '.join(allowed) or 'none'})")
        params = list(source.params)
        key = [key] if isinstance(key, str) else list(key or ())
        for name in key:
            if name not in params:
                raise ValueError(f"@tilejit.autotune key: {name!r} is not a parameter of "
                                 f"{kernel.__name__} (parameters: {', '.join(params)})")
        self.kernel = kernel
        self.configs = [dict(c) for c in configs]
        self.warmup = check_count("warmup", warmup, 0)
        self.rep = check_count("rep", rep, 1)
        self.timeout = check_timeout(timeout)
        self.compile_workers = check_workers(compile_workers)
        self.precompiled: dict | None = None    # the last tuning's parallel compile
        self.key = tuple(key)
        self.best_config: dict | None = None
        self.timings: list = []
        self.__name__ = getattr(kernel, "__name__", "kernel")
        self.__doc__ = getattr(kernel, "__doc__", None)
        self.__wrapped__ = kernel
        self._source = source
        self._tuned = {name for c in self.configs for name in c}
        self._plain_configs = tuple(plain_value(c) for c in self.configs)
        self._best: dict = {}
        self._lock = threading.Lock()
        self._fingerprint = None
        self._store = DiskCache("autotune")

    def __repr__(self):
        return f"<tilejit.autotune {self.__name__}: {len(self.configs)} configs>"

    # -- the tuning key ----------------------------------------------------------------
    def explicit(self, args, kwargs) -> list:
        """The tuned parameters this call gives values for (then it is not tuned)."""
        passed = list(self._source.params[:len(args)]) + list(kwargs)
        return [name for name in passed if name in self._tuned]

    def _signature(self, args, kwargs) -> tuple:
        params = self._source.params
        named = dict(zip(params, args))
        named.update(kwargs)
        constexprs = set(self._source.constexpr_params) | set(self.key)
        parts, device = [], None
        for name in list(params) + sorted(set(kwargs) - set(params)):
            if name in named:
                desc, cuda = _describe(named[name], name in constexprs)
                parts.append((name, desc))
                device = cuda if device is None else device
        if len(args) > len(params):
            parts.append(("extra positional", len(args)))
        inner = getattr(self.kernel, "kernel", self.kernel)     # (a @tilejit.jit program's)
        if target_override() == "sim" or getattr(inner, "target", None) == "sim":
            device = None       # CUDA tensors too: simulated on host copies, not timed
        return tuple(parts), ("sim" if device is None else cuda_device_name(device))

    def _disk_key(self, sig) -> str:
        if self._fingerprint is None:
            self._fingerprint = function_fingerprint(self._source.func)
        return digest("tilejit-autotune", self._fingerprint, self._plain_configs, sig)

    def _load(self, sig) -> dict | None:
        payload = self._store.load(self._disk_key(sig))
        if payload is None:
            return None
        index, times = payload.get("index"), payload.get("times_ms")
        if (not isinstance(index, int) or not 0 <= index < len(self.configs)
                or json_config(self.configs[index]) != payload.get("config")):
            return None
        config = self.configs[index]
        if isinstance(times, list) and len(times) == len(self.configs):
            self.timings = [(c, ms, "from the disk cache") for c, ms in zip(self.configs, times)]
        self._best[sig] = config
        return config

    # -- calls -------------------------------------------------------------------------
    def _launch(self, args, kwargs, config):
        """The kernel with every parameter positional where possible: the kernel's fast
        path takes no keywords."""
        params, defaults = self._source.params, getattr(self._source, "defaults", None)
        if defaults is not None and set(kwargs) <= set(params[len(args):]):
            given = {**defaults, **config, **kwargs}
            rest = params[len(args):]
            if all(name in given for name in rest):
                return self.kernel(*args, *(given[name] for name in rest))
        return self.kernel(*args, **kwargs, **config)

    def __call__(self, *args, **kwargs):
        if self.explicit(args, kwargs):
            # TileLang's rule: tuned values given explicitly are used as they are
            return self.kernel(*args, **kwargs)
        sig = self._signature(args, kwargs)
        config = self._best.get(sig)
        if config is None:
            with self._lock:
                config = self._best.get(sig)
                if config is None:
                    config = self._load(sig)
                if config is None:
                    config = self._tune(sig, args, kwargs)
        self.best_config = config
        return self._launch(args, kwargs, config)

    def compile(self, *args, **kwargs):
        """``kernel.compile`` with the best config for these arguments: the known one,
        else tuned now on the arrays given, as a call would (TileLang's ``compile`` is its
        call returning the kernel); where no array is given to time with, the last chosen,
        else the kernel's defaults. The kernel carries TileLang's ``config``, ``latency``
        (ms of the best config's timing, NaN where none was timed here) and
        ``ref_latency`` (None: no reference program is timed)."""
        options = {k: kwargs.pop(k) for k in ("target", "arch") if k in kwargs}
        if self.explicit(args, kwargs):
            return self.kernel.compile(*args, **kwargs, **options)
        sig = self._signature(args, kwargs)
        config = self._best.get(sig)
        config = self._load(sig) if config is None else config
        if config is None and self._arrays(args, kwargs):
            with self._lock:
                config = self._best.get(sig) or self._tune(sig, args, kwargs)
        config = (self.best_config or {}) if config is None else config
        self.best_config = config
        kernel = self.kernel.compile(*args, **kwargs, **config, **options)
        timed_ms = next((ms for c, ms, _ in self.timings if c == config and ms is not None),
                        None)
        for name, value in (("config", dict(config)),
                            ("latency", float("nan") if timed_ms is None else timed_ms),
                            ("ref_latency", None)):
            try:
                setattr(kernel, name, value)
            except AttributeError:      # a handle that takes no attributes: as it is
                break
        return kernel

    @staticmethod
    def _arrays(args, kwargs) -> list:
        """The call's arrays (numpy or torch), each once, in order."""
        torch = sys.modules.get("torch")
        arrays, seen = [], set()
        for value in list(args) + list(kwargs.values()):
            is_torch = torch is not None and isinstance(value, torch.Tensor)
            if (is_torch or isinstance(value, np.ndarray)) and id(value) not in seen:
                seen.add(id(value))
                arrays.append(value)
        return arrays

    # -- tuning ------------------------------------------------------------------------
    def _precompile(self, args, kwargs):
        """The configs' specializations (what each config's call will look up), compiled
        in worker processes into the disk cache (``precompile.py``) before the timing."""
        prepare = getattr(self.kernel, "_prepare", None)
        workers = self.compile_workers or default_workers()
        self.precompiled = None
        if prepare is None or workers < 2 or len(self.configs) < 2:
            return
        specs = []
        for config in self.configs:
            try:
                values = tuple(self.kernel._bind(args, {**kwargs, **config}))
                specs.append(prepare(values)[3])
            except Exception:   # the config's own call reports it
                continue
        self.precompiled = precompile(self.kernel, specs, workers)

    def _tune(self, sig, args, kwargs) -> dict:
        torch = sys.modules.get("torch")
        cuda = sig[1] != "sim"
        arrays = self._arrays(args, kwargs)
        originals = [a.copy() if isinstance(a, np.ndarray) else a.detach().clone()
                     for a in arrays]

        def restore():
            for array, original in zip(arrays, originals):
                if isinstance(array, np.ndarray):
                    if array.flags.writeable:
                        np.copyto(array, original)
                else:
                    array.copy_(original)

        def results_of(config):
            """Snapshots of what a launch of ``config`` returns, or of the arrays it
            takes (an in-place kernel)."""
            out = self._launch(args, kwargs, config)
            if cuda and torch is not None:
                torch.cuda.synchronize()
            if out is not None:
                out = list(out) if isinstance(out, (tuple, list)) else [out]
            return [snapshot(v) for v in (arrays if out is None else out)]

        if cuda:
            self._precompile(args, kwargs)
        skippable = skippable_errors()
        timings, reference, reference_config = [], None, None
        update, close = progress(self.__name__, len(self.configs))
        try:
            for index, config in enumerate(self.configs):
                restore()
                ms, note = None, None
                try:
                    results = results_of(config)
                    if reference is None:
                        restore()
                        reference = settled_reference(results, results_of(config))
                        reference_config = config
                    else:
                        problem = compare_results(reference, results)
                        if problem:
                            note = f"results differ from config {reference_config}: {problem}"
                    if note is None:
                        run = functools.partial(self._launch, args, kwargs, config)
                        ms, note = timed(run, self.warmup, self.rep, cuda, self.timeout)
                        note = note or "ok"
                except skippable as e:
                    note = f"failed: {type(e).__name__}: {first_line(e)}"
                if ms is None:
                    warnings.warn(f"tilejit.autotune {self.__name__}: config {config} "
                                  f"skipped: {note}", AutotuneWarning, stacklevel=3)
                timings.append((config, ms, note))
                update(index, config, f"{ms:.4f} ms" if ms is not None else note)
        finally:
            close()
            restore()
        self.timings = timings
        valid = [(ms, index) for index, (_, ms, _) in enumerate(timings) if ms is not None]
        if not valid:
            lines = "\n".join(f"  {c}: {note}" for c, _, note in timings)
            raise RuntimeError(f"tilejit.autotune {self.__name__}: no config ran "
                               f"successfully:\n{lines}")
        best = min(valid)[1]
        config = self.configs[best]
        self._best[sig] = config
        self._store.store(self._disk_key(sig), {
            "config": json_config(config), "index": best,
            "times_ms": [ms for _, ms, _ in timings]})
        return config

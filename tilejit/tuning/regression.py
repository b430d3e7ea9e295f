"""TileLang's performance-regression harness (``tilelang.testing.process_func`` and
``regression``), which its ``examples/*/regression_*.py`` scripts call::

    def regression_example_gemm():
        tilelang.testing.process_func(example_gemm.run_regression_perf)

    if __name__ == "__main__":
        tilelang.testing.regression()

``regression()`` runs every ``regression_*`` function of the calling module in name
order; each ``process_func(fn, name=None, **kwargs)`` calls ``fn(**kwargs)``, which
returns a latency (any positive number: only ratios between runs matter), and records
it under ``name`` (default: ``fn``'s module, without a ``regression_`` prefix) and the
case running. A latency that is not positive is measured again, up to five times, then
left out with a ``RuntimeWarning``. At the end each result prints as ``name: latency``
(TileLang's text form)."""
from __future__ import annotations

import inspect
import time
import warnings
from dataclasses import dataclass

_RETRIES = 5


@dataclass(frozen=True)
class PerfResult:
    name: str
    latency: float
    case: str | None = None


RESULTS: list = []
_case: list = [None]         # the regression_* function running, without its prefix


def _strip(name: str, prefix: str = "regression_") -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def process_func(func, name: str | None = None, /, **kwargs) -> None:
    """Record the latency ``func(**kwargs)`` returns (see the module's docstring)."""
    if not callable(func):
        raise TypeError(f"process_func: func must be callable, got {type(func).__name__}")
    label = _strip(getattr(func, "__module__", None) or "<unknown>" if name is None
                   else name)
    for _ in range(1 + _RETRIES):
        latency = float(func(**kwargs))
        if latency > 0:
            RESULTS.append(PerfResult(label, latency, _case[0]))
            return
    warnings.warn(f"{label}: latency {latency} <= 0 after {1 + _RETRIES} runs; left out",
                  RuntimeWarning, stacklevel=2)


def regression(prefixes=("regression_",), verbose: bool = True, only=None) -> list:
    """Run the calling module's functions named with one of ``prefixes`` (in name order;
    ``only``: names or substrings to keep), print each one's time when ``verbose``, then
    every recorded result as ``name: latency``; returns the results."""
    caller = inspect.currentframe().f_back.f_globals
    found = sorted((k, v) for k, v in caller.items()
                   if callable(v) and any(k.startswith(p) for p in prefixes))
    if only:
        keep = [only] if isinstance(only, str) else list(only)
        found = [(k, v) for k, v in found if any(s.lower() in k.lower() for s in keep)]
    RESULTS.clear()
    for index, (name, fn) in enumerate(found, 1):
        _case[0] = _strip(name)
        start = time.perf_counter()
        try:
            fn()
        finally:
            _case[0] = None
        if verbose:
            print(f"  [{index}/{len(found)}] {_strip(name)} "
                  f"({time.perf_counter() - start:.2f}s)", flush=True)
    for r in RESULTS:
        print(f"{r.name}: {r.latency}")
    return list(RESULTS)

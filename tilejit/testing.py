"""Timing for tuning and benchmarks: ``do_bench``."""
from __future__ import annotations

import sys
import time


def _count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"do_bench: {name} is a number of calls, an int >= {minimum}; "
                         f"got {value!r}")
    if value < minimum:
        raise ValueError(f"do_bench: {name} must be >= {minimum}, got {value}")
    return value


def _cuda_available() -> bool:
    torch = sys.modules.get("torch")   # not imported: fn launches nothing through torch
    return torch is not None and torch.cuda.is_available()


def do_bench(fn, warmup: int = 25, rep: int = 100, *, cuda: bool | None = None) -> float:
    """Median milliseconds of ``fn()`` over ``rep`` calls after ``warmup`` calls.

    With CUDA (``cuda=None``: when torch is imported and sees a CUDA device) each call is timed with
    CUDA events on the current stream, and a 256 MB buffer is rewritten before each so
    no call starts from a warm L2. Without (CPU, simulator), ``time.perf_counter``."""
    import statistics
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    warmup = _count("warmup", warmup, 0)
    rep = _count("rep", rep, 1)
    if cuda is None:
        cuda = _cuda_available()
    if cuda:
        import torch

        from .testing_support import median_ms
        ms = median_ms(fn, warmup=warmup, rep=rep, flush_l2=True)
        torch.cuda.synchronize()
        return float(ms)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rep):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(statistics.median(times))

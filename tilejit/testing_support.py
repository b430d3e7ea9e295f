"""Timing helpers shared by the benchmarks and tests (CUDA events, median)."""
from __future__ import annotations


def median_ms(fn, warmup: int = 10, rep: int = 50, flush_l2: bool = True) -> float:
    """Median milliseconds of ``fn()`` on the current CUDA stream, timed with events;
    with ``flush_l2`` an L2-sized buffer is rewritten between runs so no run starts from
    a warm cache (needless when the data is many times the L2)."""
    import torch
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rep):
        if flush_l2:
            cache.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]

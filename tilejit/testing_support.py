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


def interleaved_times(named_fns, rounds: int = 3, timer=None, **timer_kw) -> dict:
    """{name: [ms of each round]}: every function timed once per round, the rounds one
    after another, so a slow spell of the device (clocks, a neighbour) touches every
    variant alike; a benchmark reports each name's best round. There are at least as
    many rounds as functions, and each round rotates the order by one. ``named_fns``
    holds (name, fn, …) tuples; ``timer`` defaults to ``median_ms``."""
    timer = timer or median_ms
    times = {entry[0]: [] for entry in named_fns}
    n = len(named_fns)
    for r in range(max(rounds, n) if n else 0):
        # each round starts one variant later: no variant always runs right after the
        # same neighbour (right after cuDNN, the most power-hungry, FlashAttention measured
        # 0.87 of FA2 causal; 0.92-0.96 rotated; H200, 2026-11-29)
        for name, fn, *_ in named_fns[r % n:] + named_fns[:r % n]:
            times[name].append(timer(fn, **timer_kw))
    return times

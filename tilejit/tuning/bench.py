"""Timing: ``do_bench`` (tilejit.testing, TileLang's profiler), CUDA-event medians and
the interleaved rounds of the benchmarks."""
from __future__ import annotations

import statistics
import sys
import time


def median_ms(fn, warmup: int = 10, rep: int = 50, flush_l2: bool = True,
              warmup_ms: float = 25.0) -> float:
    """Median milliseconds of ``fn()`` on the current CUDA stream (``event_times``)."""
    times = event_times(fn, warmup, rep, flush_l2, warmup_ms)
    return times[len(times) // 2]


def event_times(fn, warmup: int = 10, rep: int = 50, flush_l2: bool = True,
                warmup_ms: float = 25.0) -> list:
    """The milliseconds of ``rep`` calls of ``fn()`` on the current CUDA stream, sorted,
    timed with events;
    with ``flush_l2`` an L2-sized buffer is rewritten between runs so no run starts from
    a warm cache (needless when the data is many times the L2). The warm-up runs
    ``fn`` ``warmup`` times and at least ``warmup_ms``, so the clocks settle on this
    kernel's power draw rather than the previous one's (a 0.2 ms GEMM's 10 runs are
    2 ms, less than the power controller takes)."""
    import time

    import torch
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        fn()
        torch.cuda.synchronize()
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
    return times


def interleaved_times(named_fns, rounds: int = 3, timer=None, warm_round: bool = True,
                      **timer_kw) -> dict:
    """{name: [ms of each round]}: every function timed once per round, the rounds one
    after another, so a slow spell of the device (clocks, a neighbour) touches every
    variant alike; a benchmark reports each name's best round. There are at least as
    many rounds as functions, in the orders of a Williams design (``round_orders``): over
    each n rounds every variant comes first once and, for an even n, follows every other
    variant once. ``named_fns`` holds (name, fn, …) tuples; ``timer`` defaults to
    ``median_ms``.

    ``warm_round``: the rounds start with one untimed round of every function. The first
    function timed after the device sat idle (the checks, the compiles) runs at clocks
    the others never see: on the H200 the first variant of the first round measured
    6–10 % faster than in any later round at 4096³ (cuBLAS 0.179 ms against 0.198–0.209,
    and tilejit's GEMM 0.186 against 0.209–0.213 when it came first; 2026-12-02), so a
    table of best rounds favoured whichever variant was listed first."""
    timer = timer or median_ms
    times = {entry[0]: [] for entry in named_fns}
    n = len(named_fns)
    if warm_round:
        for entry in named_fns:
            timer(entry[1], **timer_kw)
    for order in round_orders(n, max(rounds, n) if n else 0):
        for i in order:
            name, fn, *_ = named_fns[i]
            times[name].append(timer(fn, **timer_kw))
    return times


def round_orders(n: int, rounds: int) -> list:
    """The order of n variants in each round: a Williams design (0, 1, n-1, 2, n-2, …
    shifted by the round), reversed in every other block of n rounds. A variant's
    predecessor changes from round to round: a fixed order, or one only rotated, keeps
    the same neighbours, and the one right after the most power-hungry variant runs at
    lower clocks (FlashAttention: 0.87 of FA2 causal right after cuDNN in every round;
    H200, 2026-11-29; in one device session the same kernel measured 0.948 of FA2 right
    after cuDNN in 5 of 6 rounds, and 0.985 in a run without cuDNN)."""
    base, lo, hi = [0], 1, n - 1
    for i in range(1, n):
        if i % 2:
            base.append(lo)
            lo += 1
        else:
            base.append(hi)
            hi -= 1
    orders = []
    for r in range(rounds):
        order = [(b + r) % n for b in base]
        orders.append(order[::-1] if (r // n) % 2 else order)
    return orders


def tilelang_times(fn, warmup_ms: float = 25.0, rep_ms: float = 100.0, n_warmup: int = 0,
                   n_repeat: int = 0, *, kernel_only: bool = False,
                   early_stop_ms: float | None = None, cuda: bool | None = None) -> list:
    """The milliseconds of ``fn()`` as TileLang's ``do_bench`` measures them, sorted.

    On a GPU: one call, then five (each after the 256 MB L2 flush) whose mean is the
    estimate; above ``early_stop_ms`` the estimate alone is returned. Then
    ``max(1, warmup_ms // estimate)`` calls to warm up and ``max(1, rep_ms // estimate)``
    timed ones (``n_warmup``/``n_repeat`` instead when nonzero), each after the flush:
    each timed with CUDA events, or with ``kernel_only`` (TileLang's ``cupti`` backend)
    one value, the mean time per call of the kernels ``fn`` launched as the CUDA
    profiler (CUPTI, through ``torch.profiler``) records them, the flush left out (CUDA
    events when the profiler records no kernel). Without a GPU (the simulator) the same
    protocol with ``time.perf_counter``, the first call the estimate and the first
    warm-up; with both counts given, just those calls. A first call that ran a kernel in
    the simulator is the only one: its time is returned alone."""
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    for name, value in (("warmup", warmup_ms), ("rep", rep_ms)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 <= value < float("inf"):          # (NaN and infinity too)
            raise ValueError(f"do_bench: {name} is a time in milliseconds, a number >= 0; "
                             f"got {value!r}")
    n_warmup = check_count("_n_warmup", n_warmup, 0)
    n_repeat = check_count("_n_repeat", n_repeat, 0)
    if cuda is None:
        cuda = _cuda_available()
    first_ms, simulated = _first_call(fn)
    if simulated:
        return [first_ms]
    if not cuda:
        return _cpu_times(fn, warmup_ms, rep_ms, n_warmup, n_repeat, early_stop_ms,
                          first_ms)
    import torch
    estimate = max(statistics.fmean(event_times(fn, 0, 5, True, 0.0)), 1e-6)
    if early_stop_ms is not None and estimate > early_stop_ms:
        return [estimate]
    for _ in range(n_warmup or max(1, int(warmup_ms / estimate))):
        fn()
    n_repeat = n_repeat or max(1, int(rep_ms / estimate))
    if kernel_only:
        cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
        ms = _profiled_kernel_ms(fn, cache, n_repeat)
        if ms is not None:
            return [ms]
        del cache       # event_times flushes with a buffer of its own
    return event_times(fn, warmup=0, rep=n_repeat, flush_l2=True, warmup_ms=0.0)


_FLUSH_LABEL = "tilejit::l2_flush"


def _profiled_kernel_ms(fn, cache, n_repeat: int) -> float | None:
    """Mean milliseconds per call of the kernels ``fn`` launches, from the CUDA
    profiler's records (the flush's, under ``_FLUSH_LABEL``, left out); None when it
    records no kernel (no CUPTI)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n_repeat):
            with record_function(_FLUSH_LABEL):
                cache.zero_()
            fn()
        torch.cuda.synchronize()
    total = flush = 0.0
    for event in prof.events():
        if getattr(getattr(event, "device_type", None), "name", "") != "CUDA":
            continue
        if not event.is_user_annotation:
            total += event.self_device_time_total
        elif event.key == _FLUSH_LABEL:
            flush += event.self_device_time_total
    if total <= 0:
        return None
    return (total - flush) / n_repeat * 1e-3


def _cpu_times(fn, warmup_ms, rep_ms, n_warmup, n_repeat, early_stop_ms, first_ms) -> list:
    def timed():
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    if not (n_warmup and n_repeat):
        estimate = max(first_ms, 1e-3)      # at most 1000 calls per millisecond asked
        if early_stop_ms is not None and estimate > early_stop_ms:
            return [estimate]
        n_warmup = n_warmup or max(1, int(warmup_ms / estimate))
        n_repeat = n_repeat or max(1, int(rep_ms / estimate))
    for _ in range(n_warmup - 1):          # (the first call was the first warm-up)
        fn()
    return sorted(timed() for _ in range(n_repeat))


def check_count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"do_bench: {name} is a number of calls, an int >= {minimum}; "
                         f"got {value!r}")
    if value < minimum:
        raise ValueError(f"do_bench: {name} must be >= {minimum}, got {value}")
    return value


def _simulated_launches() -> int:
    runner = sys.modules.get("tilejit.sim.runner")  # not imported: nothing was simulated
    return runner.simulated_launches() if runner is not None else 0


def _first_call(fn):
    """The milliseconds of one call of ``fn()`` (the device's work included), and whether
    the call ran a kernel in the simulator: then its time is the simulator's and no
    further call is made (TileLang's examples time each kernel they test; on the
    simulator each call would simulate the whole launch again)."""
    before = _simulated_launches()
    start = time.perf_counter()
    fn()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3, _simulated_launches() != before


def _cuda_available() -> bool:
    torch = sys.modules.get("torch")   # not imported: fn launches nothing through torch
    return torch is not None and torch.cuda.is_available()


def do_bench(fn, warmup: int = 25, rep: int = 100, *, cuda: bool | None = None) -> float:
    """Median milliseconds of ``fn()`` over ``rep`` calls after ``warmup`` calls
    (``bench_times``)."""
    return float(statistics.median(bench_times(fn, warmup, rep, cuda=cuda)))


def bench_times(fn, warmup: int = 25, rep: int = 100, *, cuda: bool | None = None) -> list:
    """The milliseconds of ``rep`` calls of ``fn()`` after ``warmup`` calls, sorted.

    With CUDA (``cuda=None``: when torch is imported and sees a CUDA device) each call is
    timed with CUDA events on the current stream, and a 256 MB buffer is rewritten before
    each so no call starts from a warm L2. Without (CPU, simulator),
    ``time.perf_counter``. A first call that ran a kernel in the simulator is the only
    one: its time is returned alone."""
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    warmup = check_count("warmup", warmup, 0)
    rep = check_count("rep", rep, 1)
    if cuda is None:
        cuda = _cuda_available()
    first_ms, simulated = _first_call(fn)
    if simulated:                       # a kernel in the simulator: its time, once
        return [first_ms]
    if cuda:                            # (the first call was the first warm-up)
        import torch
        times = event_times(fn, warmup=max(warmup - 1, 0), rep=rep, flush_l2=True)
        torch.cuda.synchronize()
        return [float(t) for t in times]
    # the first call was the first warm-up, or without any the first timed call
    times = [] if warmup else [first_ms]
    warmup, rep = max(warmup - 1, 0), rep - len(times)
    for _ in range(warmup):
        fn()
    for _ in range(rep):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)

"""Autotuning's configs compiled in parallel worker processes, then timed one at a time.

A config's cold compile is about a second, most of it single-threaded Python (Numba's
front end, typing and lowering) and LLVM under one process's GIL, so threads would not
overlap them. Before the timing loop, ``precompile`` forks up to ``workers`` processes
that compile the configs' specializations (made by the tuning process, so the keys are
exactly those its calls will look up) into the disk cache; each config's first launch in
the tuning process is then a disk-cache hit. The children only compile: they never call
the CUDA driver (a forked child of a process that initialized CUDA must not), and a
config that fails in a child is compiled again, and its error reported, when it is
timed.

It needs the disk cache (the results travel through it) and the ``fork`` start method
(Linux); elsewhere, with one worker or one config, nothing happens and the configs
compile one by one as before.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
import warnings

from tilejit.runtime.disk_cache import cache_dir

_JOB: tuple | None = None      # (kernel, specs): what forked workers find in their memory


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _compile_one(index: int):
    """A worker: specialization ``index`` compiled into the disk cache; None, or the
    error's first line."""
    kernel, specs = _JOB
    # the compiler, in the worker: the tuning process may not have imported it yet
    from tilejit.runtime.kernel_cache import load_or_compile
    try:
        load_or_compile(kernel, specs[index])
        return None
    except Exception as e:      # reported by the tuning process when the config runs
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def precompile(kernel, specs: list, workers: int) -> dict | None:
    """Compile ``specs`` of ``kernel`` in up to ``workers`` forked processes, into the disk
    cache. Returns {"workers", "seconds", "errors"} when it ran, else None."""
    global _JOB
    workers = min(workers, len(specs))
    if (workers < 2 or cache_dir() is None
            or "fork" not in multiprocessing.get_all_start_methods()):
        return None
    start = time.perf_counter()
    _JOB = (kernel, list(specs))
    try:
        with warnings.catch_warnings():
            # Python warns that fork() in a process with threads (torch's) may deadlock;
            # the children run the compiler only, no lock another thread could hold
            warnings.simplefilter("ignore", DeprecationWarning)
            # (a pool of futures: a worker that dies breaks it, where multiprocessing's
            # Pool would wait forever for the lost task)
            with concurrent.futures.ProcessPoolExecutor(
                    workers, mp_context=multiprocessing.get_context("fork")) as pool:
                errors = list(pool.map(_compile_one, range(len(specs))))
    except Exception as e:      # a worker that died (it aborted): compile one by one
        return {"workers": workers, "seconds": time.perf_counter() - start,
                "errors": [f"the worker pool failed: {type(e).__name__}: {e}"]}
    finally:
        _JOB = None
    return {"workers": workers, "seconds": time.perf_counter() - start,
            "errors": [e for e in errors if e]}

"""Several threads simulating kernels at once: each launch's block index and lane mask
are its own thread's, so every call computes exactly what it would alone."""
import sys
import threading

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from vector_add import vector_add

THREADS, CALLS = 8, 6


@tilejit.kernel
def scaled_rows(A, B, C, block: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, block), M, threads=128) as (bx, by):
        t = T.alloc_fragment((block,), T.float32)
        for i in T.Parallel(block):
            col = bx * block + i
            if col < N:
                t[i] = A[by, col] + B[by, col] * by
        for i in T.Parallel(block):
            col = bx * block + i
            if col < N:
                C[by, col] = t[i]


@pytest.fixture
def fast_switching():
    """Switch threads every 10 microseconds (not 5 ms): calls interleave inside a launch."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _run_threads(work):
    barrier = threading.Barrier(THREADS)
    failures = []

    def run(t):
        barrier.wait()
        try:
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported below, with its thread
            failures.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, "\n".join(failures)


def test_vector_add_from_eight_threads(fast_switching):
    vector_add(np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32),
               block=128)                          # type-checked once, before the threads

    def work(t):
        rng = np.random.default_rng(t)
        for call in range(CALLS):
            n = 300 + 211 * t + 37 * call          # ragged last blocks, different grids
            a = rng.standard_normal(n).astype(np.float32)
            b = rng.standard_normal(n).astype(np.float32)
            c = np.full_like(a, np.nan)
            vector_add(a, b, c, block=128)
            np.testing.assert_array_equal(c, a + b, err_msg=f"n={n}")

    _run_threads(work)


def test_2d_grid_with_tiles_from_eight_threads(fast_switching):
    x = np.ones((1, 3), np.float32)
    scaled_rows(x, x, x.copy())

    def work(t):
        rng = np.random.default_rng(100 + t)
        for call in range(CALLS):
            m, n = 2 + (t + call) % 3, 70 + 29 * t + 13 * call
            a = rng.standard_normal((m, n)).astype(np.float32)
            b = rng.standard_normal((m, n)).astype(np.float32)
            c = np.full_like(a, np.nan)
            scaled_rows(a, b, c)
            ref = a + b * np.arange(m, dtype=np.float32)[:, None]
            np.testing.assert_array_equal(c, ref, err_msg=f"m={m}, n={n}")

    _run_threads(work)


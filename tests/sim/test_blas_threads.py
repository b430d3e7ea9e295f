"""A simulated launch runs numpy's BLAS on one thread (sim/blas_threads.py): the
simulator's products are a tile's, and several simulations at once (pytest -n, a corpus
of test files) oversubscribed the cores with BLAS's spinning threads (TileLang's sparse
MLA example, three at once on two cores: 74-85 s each, 18.5-19.6 s with one thread)."""
import threading

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim import blas_threads


@tilejit.kernel
def small_gemm(A, B, C):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((32, 32), "float16")
        b = T.alloc_shared((32, 32), "float16")
        c = T.alloc_fragment((32, 32), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        T.gemm(a, b, c)
        T.copy(c, C)


class FakeBlas:
    """A BLAS whose thread count is recorded: (set, get) as blas_threads.control gives."""

    def __init__(self, threads=8):
        self.threads, self.calls = threads, []

    def set(self, n):
        self.calls.append(n)
        self.threads = n

    def get(self):
        return self.threads


@pytest.fixture
def fake_blas(monkeypatch):
    fake = FakeBlas()
    monkeypatch.setattr(blas_threads, "_found", True)
    monkeypatch.setattr(blas_threads, "_control", (fake.set, fake.get))
    return fake


def test_a_simulated_launch_runs_blas_on_one_thread_and_restores_it(fake_blas, monkeypatch):
    from tilejit.sim import semantics
    seen, real = [], semantics.accumulate

    def watching(*args):
        seen.append(fake_blas.threads)     # the BLAS's threads as the product runs
        return real(*args)
    monkeypatch.setattr(semantics, "accumulate", watching)
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    small_gemm(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)
    assert seen == [1]
    assert fake_blas.calls == [1, 8] and fake_blas.threads == 8


def test_nested_and_concurrent_simulations_restore_the_count_once(fake_blas):
    """The count is set when the first simulation of the process starts and restored
    when the last ends, whatever the order the threads end in."""
    inside, release = threading.Barrier(3), threading.Event()

    def simulate():
        with blas_threads.one_blas_thread():
            inside.wait()
            release.wait()
    workers = [threading.Thread(target=simulate) for _ in range(2)]
    for w in workers:
        w.start()
    inside.wait()
    assert fake_blas.threads == 1
    with blas_threads.one_blas_thread():
        assert fake_blas.threads == 1
    release.set()
    for w in workers:
        w.join()
    assert fake_blas.calls == [1, 8] and fake_blas.threads == 8


def test_the_loaded_blas_is_found_where_numpy_has_one():
    found = blas_threads._loaded_blas()
    if found is None:
        pytest.skip("numpy's BLAS exports no thread-count functions here")
    set_fn, get_fn = found
    before = get_fn()
    set_fn(1)
    assert get_fn() == 1
    set_fn(before)
    assert get_fn() == before

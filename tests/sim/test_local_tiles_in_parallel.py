"""A thread's own ``T.alloc_local`` array written in a ``T.Parallel`` body, declared in
the body or before the loop: each iteration has it to itself (its thread's registers on
the GPU). The simulator ran such a body lane-wise, on one array for all iterations, so
every iteration read the last one's value; it now runs it one iteration at a time. In
simulation against float64, on the GPU against the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def declared_inside(X, Y):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(X.shape[0]):
            tmp = T.alloc_local((2,), "float32")
            tmp[0] = X[i] * 2.0
            tmp[1] = tmp[0] + 1.0
            Y[i] = tmp[1]


@tilejit.kernel
def declared_before(X, Y, threads: T.constexpr = 4):
    """Each iteration scans its row with the array it shares with no other iteration."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
        best = T.alloc_local((1,), "float32")
        for t in T.Parallel(threads):
            best[0] = -T.infinity("float32")
            for j in T.serial(N):
                best[0] = T.max(best[0], X[bx * threads + t, j])
            Y[bx * threads + t] = best[0]


@tilejit.kernel
def whole_fragment_in_a_parallel(X, Y):
    """A (1,) fragment stored at a constant index in a T.Parallel: every thread holds it
    whole on the GPU, each iteration its own value (found by a review: the simulator ran
    the body lane-wise, every iteration reading the last one's)."""
    with T.Kernel(1, threads=128):
        t = T.alloc_fragment((1,), "float32")
        for i in T.Parallel(X.shape[0]):
            t[0] = X[i] * 2.0
            Y[i] = t[0] + 1.0


def _data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_each_iteration_has_its_own_array():
    x = _data(0, 128)
    y = np.zeros_like(x)
    declared_inside(x, y)
    np.testing.assert_allclose(y, x.astype(np.float64) * 2 + 1, rtol=1e-6)
    x2 = _data(1, 8, 16)
    y2 = np.zeros(8, np.float32)
    declared_before(x2, y2)
    np.testing.assert_array_equal(y2, x2.max(1))
    y3 = np.zeros_like(x)
    whole_fragment_in_a_parallel(x, y3)
    np.testing.assert_allclose(y3, x.astype(np.float64) * 2 + 1, rtol=1e-6)
    assert "st.global" in whole_fragment_in_a_parallel.compile(
        x, y3, target="cuda", arch="sm_90a").ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    x = _data(0, 128)
    ptxas(declared_inside.compile(x, x.copy(), target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    x = _data(2, 128)
    y = torch.zeros(128, device="cuda")
    declared_inside(torch.from_numpy(x).cuda(), y)
    sim = np.zeros_like(x)
    declared_inside(x, sim)
    np.testing.assert_array_equal(y.cpu().numpy(), sim)
    x2 = _data(3, 8, 16)
    y2 = torch.zeros(8, device="cuda")
    declared_before(torch.from_numpy(x2).cuda(), y2)
    np.testing.assert_array_equal(y2.cpu().numpy(), x2.max(1))
    y3 = torch.zeros(128, device="cuda")
    whole_fragment_in_a_parallel(torch.from_numpy(x).cuda(), y3)
    np.testing.assert_allclose(y3.cpu().numpy(), x.astype(np.float64) * 2 + 1, rtol=1e-6)

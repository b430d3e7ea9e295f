"""A fragment indexed with some of a T.Parallel's indices and values fixed within it at
its other positions, ``b_local[k, j]`` in a loop over ``(i, j)`` with ``k`` a serial
loop's variable (TileLang's DeepSeek mHC post kernel): the fragment follows the loop's
layout without ``i``, every ``k`` held in each thread's registers
(passes/layout_inference.py, ``mixed_positions``)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

HC, HB = 4, 256


@tilejit.kernel
def mix_inner(A, Bm, X):
    """x[o, h] = sum_k a[k, o] * b[k, h], the serial loop inside the T.Parallel."""
    with T.Kernel(1, threads=128) as bx:
        a_local = T.alloc_fragment((HC, HC), T.float32)
        b_shared = T.alloc_shared((HC, HB), T.float32)
        b_local = T.alloc_fragment((HC, HB), T.float32)
        x_local = T.alloc_fragment((HC, HB), T.float32)
        T.copy(A, a_local)
        T.copy(Bm, b_shared)
        T.copy(b_shared, b_local)
        T.clear(x_local)
        for i_hco, i1_h in T.Parallel(HC, HB):
            for i_hci in T.serial(HC):
                x_local[i_hco, i1_h] += a_local[i_hci, i_hco] * b_local[i_hci, i1_h]
        T.copy(x_local, X)


@tilejit.kernel
def row_broadcast(Bm, X, rows: T.constexpr = 8):
    """x[i, j] = b[2, j] + b[5, j]: two fixed rows of b over a loop of another shape."""
    with T.Kernel(1, threads=128) as bx:
        b_local = T.alloc_fragment((rows, 64), T.float32)
        x_local = T.alloc_fragment((16, 64), T.float32)
        T.copy(Bm, b_local)
        for i, j in T.Parallel(16, 64):
            x_local[i, j] = b_local[2, j] + b_local[5, j] * i
        T.copy(x_local, X)


@tilejit.kernel
def two_ways(Bm, X):
    with T.Kernel(1, threads=128) as bx:
        b_local = T.alloc_fragment((8, 64), T.float32)      # too large to hold whole
        x_local = T.alloc_fragment((16, 64), T.float32)
        T.copy(Bm, b_local)
        for i, j in T.Parallel(16, 64):
            x_local[i, j] = b_local[1, j] + b_local[j % 8, i]
        T.copy(x_local, X)


def _mix_case(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((HC, HC)).astype(np.float32)
    b = rng.standard_normal((HC, HB)).astype(np.float32)
    return (a, b, np.zeros((HC, HB), np.float32)), a.astype(np.float64).T @ b


def _rows_case(seed=0):
    b = np.random.default_rng(seed).standard_normal((8, 64)).astype(np.float32)
    want = b[2][None, :].astype(np.float64) + b[5][None, :] * np.arange(16)[:, None]
    return (b, np.zeros((16, 64), np.float32)), want


CASES = {"mix_inner": (mix_inner, _mix_case), "row_broadcast": (row_broadcast, _rows_case)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_against_float64(name):
    kernel, case = CASES[name]
    args, want = case()
    kernel(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_ptx_assembles(name, arch, ptxas):
    kernel, case = CASES[name]
    args, _ = case()
    ptxas(kernel.compile(*args, target="cuda", arch=arch).ptx, arch)


def test_a_fragment_indexed_two_ways_is_still_an_error():
    b, x = np.zeros((8, 64), np.float32), np.zeros((16, 64), np.float32)
    with pytest.raises(CompileError, match="b_local"):
        two_ways.compile(b, x, target="cuda", arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_simulator_and_float64(name):
    import torch
    kernel, case = CASES[name]
    args, want = case(1)
    sim = [a.copy() for a in args]
    kernel(*sim)
    dev = [torch.from_numpy(a).cuda() for a in args]
    kernel(*dev)
    got = dev[-1].cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, sim[-1], rtol=1e-6, atol=1e-6)

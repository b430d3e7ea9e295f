"""Fragments with extent-1 dimensions in loops that leave them out, as TileLang writes
them: ``for j in T.Parallel(N): F[0, j] = ...`` over F of shape (1, N) (the pass gives
the loop the unit dimension: ``layout_inference._widen_unit_loops``), with a fragment
of shape (N,) indexed ``[j]`` in the same loop; and (1,)-fragments used at constant
indices, which every thread holds. In simulation against numpy, the PTX for sm_80 and
sm_90a through ptxas, on the device against torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def squash_rows(A, B, block_N: T.constexpr = 128):
    """Each block: one row segment of A (1, N) clamped to half its own [min, max], plus a
    per-column bias held in a 1-D fragment."""
    N = A.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
        a = T.alloc_fragment((1, block_N), T.float32)
        bias = T.alloc_fragment((block_N,), T.float32)
        lo = T.alloc_fragment((1,), T.float32)
        hi = T.alloc_fragment((1,), T.float32)
        T.copy(A[0, bx * block_N], a)
        T.reduce_min(a, lo, dim=1)
        T.reduce_max(a, hi, dim=1)
        for j in T.Parallel(block_N):
            bias[j] = (bx * block_N + j) * 0.001
        for j in T.Parallel(block_N):
            a[0, j] = T.clamp(a[0, j], lo[0] * 0.5, hi[0] * 0.5) + bias[j]
        T.copy(a, B[0, bx * block_N])


def _reference(x, block_N=128):
    out = np.empty_like(x)
    for s in range(0, x.shape[1], block_N):
        seg = x[0, s:s + block_N].astype(np.float64)
        bias = np.arange(s, s + len(seg)) * 0.001
        out[0, s:s + block_N] = np.clip(seg, seg.min() * 0.5, seg.max() * 0.5) + bias
    return out


def _input():
    return np.random.default_rng(4).standard_normal((1, 1024)).astype(np.float32)


def test_a_unit_dimension_left_out_of_the_loop_in_simulation():
    x = _input()
    y = np.zeros_like(x)
    squash_rows(x, y)
    np.testing.assert_allclose(y, _reference(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    x = _input()
    ptxas(squash_rows.compile(x, np.zeros_like(x), target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    x = _input()
    y = torch.zeros(1, 1024, device="cuda")
    squash_rows(torch.from_numpy(x).cuda(), y)
    sim = np.zeros_like(x)
    squash_rows(x, sim)
    np.testing.assert_allclose(y.cpu().numpy(), _reference(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y.cpu().numpy(), sim, rtol=1e-6, atol=1e-6)

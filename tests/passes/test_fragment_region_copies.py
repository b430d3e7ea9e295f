"""T.copy between a region of a fragment and a whole shared tile, as TileLang's decode
kernels write ``T.copy(acc_o[:valid_block_H, :], O_shared)``: a loop over the whole
fragment with the region selected (passes/fragment_regions.py)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def rows_out(A, B, lo: T.constexpr = 0, h: T.constexpr = 4):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((64, 128), T.float32)
        S = T.alloc_shared((h, 128), T.float32)
        T.copy(A, F)
        for i, j in T.Parallel(64, 128):
            F[i, j] = F[i, j] * 2
        T.copy(F[lo:lo + h, :], S)
        T.copy(S, B)


@tilejit.kernel
def row_in(A, R, B, k: T.constexpr = 5):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((16, 64), T.float32)
        S = T.alloc_shared((64,), T.float32)
        T.copy(A, F)
        T.copy(R, S)
        T.copy(S, F[k, :])              # a pinned dimension: one row of the fragment
        T.copy(F, B)


def test_a_block_of_rows_out_of_a_fragment():
    a = np.random.rand(64, 128).astype(np.float32)
    b = np.zeros((4, 128), np.float32)
    rows_out(a, b, lo=8)
    np.testing.assert_array_equal(b, 2 * a[8:12])


def test_a_row_into_a_fragment():
    a = np.random.rand(16, 64).astype(np.float32)
    r = np.random.rand(64).astype(np.float32)
    b = np.zeros_like(a)
    row_in(a, r, b)
    want = a.copy()
    want[5] = r
    np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    a, b = np.zeros((64, 128), np.float32), np.zeros((4, 128), np.float32)
    ptxas(rows_out.compile(a, b, target="cuda", arch=arch, lo=8).ptx, arch)
    a, r = np.zeros((16, 64), np.float32), np.zeros(64, np.float32)
    ptxas(row_in.compile(a, r, a.copy(), target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_on_gpu_against_numpy():
    import torch
    a = torch.rand(64, 128, device="cuda")
    b = torch.zeros(4, 128, device="cuda")
    rows_out(a, b, lo=60)
    torch.testing.assert_close(b, 2 * a[60:64])
    f = torch.rand(16, 64, device="cuda")
    r = torch.rand(64, device="cuda")
    out = torch.zeros_like(f)
    row_in(f, r, out, k=15)
    want = f.clone()
    want[15] = r
    torch.testing.assert_close(out, want)

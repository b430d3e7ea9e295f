"""TileLang's T.Select (the select T.if_then_else is) and T.align_up(x, a) (ceildiv(x, a)
* a): in simulation against numpy, PTX assembled by ptxas, and with ``-m gpu`` on the
device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def relu_and_align(A, B, C, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                B[j] = T.Select(A[j] > 0, A[j], 0.0)
                C[j] = T.align_up(j, 32)


def test_select_is_if_then_else():
    assert T.Select is T.if_then_else


def test_in_simulation():
    a = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    b, c = np.zeros_like(a), np.zeros(300, np.int32)
    relu_and_align(a, b, c)
    np.testing.assert_array_equal(b, np.maximum(a, 0))
    np.testing.assert_array_equal(c, (np.arange(300) + 31) // 32 * 32)
    assert T.align_up(1, 32) == 32 and T.align_up(64, 32) == 64 and T.align_up(0, 8) == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros(300, np.float32)
    ptxas(relu_and_align.compile(a, a.copy(), np.zeros(300, np.int32), target="cuda",
                                 arch=arch).ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu():
    a = torch.randn(1000, device="cuda")
    b = torch.zeros(1000, device="cuda")
    c = torch.zeros(1000, dtype=torch.int32, device="cuda")
    relu_and_align(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, torch.relu(a))
    torch.testing.assert_close(c.cpu(), (torch.arange(1000, dtype=torch.int32) + 31) // 32 * 32)


@tilejit.kernel
def unsigned_select(X, Z):
    """The branches int literal and uint8 arithmetic: the literal takes the uint8 side's
    type (Numba alone meets int64 and uint64 in float64, a store error)."""
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            Z[i] = T.if_then_else(X[i] > 3, 3, X[i] + 1)


_UNSIGNED = [1, 5, 200, 0, 3, 4, 255, 2]


@tilejit.kernel
def unsigned_select_negative(X, Z, F):
    """A literal the unsigned side cannot hold (-1): the two meet in int64 (float64
    beside uint64 arithmetic), as Numba's typing meets them; the simulator's select
    widens alike (numpy would wrap -1 to 255)."""
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            Z[i] = T.if_then_else(X[i] > 3, -1, X[i])
            F[i] = T.if_then_else(X[i] > 3, -1, X[i] + 1)


def _negative_reference(x):
    x = np.asarray(x, np.int64)
    return np.where(x > 3, -1, x), np.where(x > 3, -1.0, x + 1.0)


def test_an_integer_literal_branch_takes_the_unsigned_type(ptxas):
    z = np.zeros(8, np.int32)
    x = np.array(_UNSIGNED, np.uint8)
    unsigned_select(x, z)
    np.testing.assert_array_equal(z, np.where(x > 3, 3, x.astype(np.int32) + 1))
    for arch in ("sm_80", "sm_90a"):
        ptxas(unsigned_select.compile(x, z, target="cuda", arch=arch).ptx, arch)


def test_a_literal_the_unsigned_side_cannot_hold(ptxas):
    x = np.array(_UNSIGNED, np.uint8)
    z, f = np.zeros(8, np.int32), np.zeros(8, np.float32)
    unsigned_select_negative(x, z, f)
    want_z, want_f = _negative_reference(x)
    np.testing.assert_array_equal(z, want_z)
    np.testing.assert_array_equal(f, want_f)
    ptxas(unsigned_select_negative.compile(x, z, f, target="cuda", arch="sm_90a").ptx,
          "sm_90a")


@pytest.mark.gpu
def test_an_integer_literal_branch_on_the_gpu():
    x = torch.tensor(_UNSIGNED, dtype=torch.uint8, device="cuda")
    z = torch.zeros(8, dtype=torch.int32, device="cuda")
    unsigned_select(x, z)
    zs = np.zeros(8, np.int32)
    unsigned_select(x.cpu().numpy(), zs)
    assert z.cpu().tolist() == zs.tolist() == [2, 3, 3, 1, 4, 3, 3, 3]
    f = torch.zeros(8, device="cuda")
    unsigned_select_negative(x, z, f)
    want_z, want_f = _negative_reference(_UNSIGNED)
    assert z.cpu().tolist() == want_z.tolist() and f.cpu().tolist() == want_f.tolist()

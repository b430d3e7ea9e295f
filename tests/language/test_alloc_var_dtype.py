"""A T.alloc_var keeps its dtype, as in TileLang: ``v = x`` and ``v += x`` store into it
converted (a float32 value into a float16 variable rounds to float16). In simulation
against numpy, PTX assembled by ptxas, and with ``-m gpu`` on the device."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def through_half(A, B, C, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                v = T.alloc_var(T.float16)
                v = A[j]                    # rounds to float16
                B[j] = v
                s = T.alloc_var(T.int32, 0)
                s += A[j] * 10.0            # truncates to int32 at each store
                C[j] = s


def _reference(a):
    return a.astype(np.float16).astype(np.float32), (a * 10.0).astype(np.int32)


def test_in_simulation():
    a = (np.random.default_rng(0).standard_normal(300) * 3).astype(np.float32)
    b, c = np.zeros_like(a), np.zeros(300, np.int32)
    through_half(a, b, c)
    want_b, want_c = _reference(a)
    np.testing.assert_array_equal(b, want_b)
    assert (b != a).any()                   # the rounding happened
    np.testing.assert_array_equal(c, want_c)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros(300, np.float32)
    ptx = through_half.compile(a, a.copy(), np.zeros(300, np.int32), target="cuda",
                               arch=arch).ptx
    assert "cvt.rn.f16.f32" in ptx and "cvt.rzi.s32.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu():
    a = torch.randn(1000, device="cuda") * 3
    b = torch.zeros(1000, device="cuda")
    c = torch.zeros(1000, dtype=torch.int32, device="cuda")
    through_half(a, b, c)
    torch.cuda.synchronize()
    want_b, want_c = _reference(a.cpu().numpy())
    np.testing.assert_array_equal(b.cpu().numpy(), want_b)
    np.testing.assert_array_equal(c.cpu().numpy(), want_c)

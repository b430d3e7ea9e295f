"""TVM's T.floordiv / T.floormod as TileLang's examples use them (block-sparse attention,
MLA): rounded toward minus infinity, the remainder with the divisor's sign, for negative
operands too; in simulation against numpy, PTX assembled by ptxas, and with ``-m gpu``
against torch and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def floor_div_mod(A, D, Q, R, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                Q[j] = T.floordiv(A[j], D[j])
                R[j] = T.floormod(A[j], D[j])


def _operands(n=1000):
    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    d = rng.integers(1, 17, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    return a, d


def test_host_values():
    assert T.floordiv(-7, 2) == -4 and T.floormod(-7, 2) == 1
    assert T.floordiv(7, -2) == -4 and T.floormod(7, -2) == -1


def test_in_simulation():
    a, d = _operands()
    q, r = np.zeros_like(a), np.zeros_like(a)
    floor_div_mod(a, d, q, r)
    np.testing.assert_array_equal(q, np.floor_divide(a, d))
    np.testing.assert_array_equal(r, np.mod(a, d))
    assert (r == 0).sum() < len(r) and (np.sign(r[r != 0]) == np.sign(d[r != 0])).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a, d = _operands(300)
    ptxas(floor_div_mod.compile(a, d, a.copy(), a.copy(), target="cuda", arch=arch).ptx,
          arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a, d = _operands(5000)
    q = torch.zeros(5000, dtype=torch.int32, device="cuda")
    r = torch.zeros_like(q)
    floor_div_mod(torch.from_numpy(a).cuda(), torch.from_numpy(d).cuda(), q, r)
    ta, td = torch.from_numpy(a).long(), torch.from_numpy(d).long()
    torch.testing.assert_close(q.cpu().long(), torch.div(ta, td, rounding_mode="floor"))
    torch.testing.assert_close(r.cpu().long(), torch.remainder(ta, td))
    sq, sr = np.zeros_like(a), np.zeros_like(a)
    floor_div_mod(a, d, sq, sr)
    np.testing.assert_array_equal(q.cpu().numpy(), sq)
    np.testing.assert_array_equal(r.cpu().numpy(), sr)


# floats: Python's `//` and `%` (Numba's, rounding the quotient with math.floor) and
# T.floordiv / T.floormod, as TVM's floordiv and floormod of floats
@tilejit.kernel
def float_div_mod(A, Q, R, Q2, R2, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                Q[j] = A[j] // 0.5
                R[j] = A[j] % 1.5
                Q2[j] = T.floordiv(A[j], -0.75)
                R2[j] = T.floormod(A[j], -0.75)


def _float_case(dtype, n=1000, device="cpu"):
    import torch
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(n, generator=g, dtype=torch.float64) * 4).to(getattr(torch, dtype))
    outs = [torch.zeros(n, dtype=a.dtype, device=device) for _ in range(4)]
    return a.to(device), outs


def _float_want(a):
    import torch
    x = a.double().cpu()
    return [torch.floor(x / 0.5), torch.remainder(x, 1.5), torch.floor(x / -0.75),
            torch.remainder(x, -0.75)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_floats_in_simulation(dtype):
    import torch
    a, outs = _float_case(dtype)
    float_div_mod(a, *outs)
    # the remainder is exact in the operands' precision, rounded once into the dtype
    for got, want in zip(outs, _float_want(a)):
        torch.testing.assert_close(got.double(), want.to(got.dtype).double(), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_floats_ptx(dtype, arch, ptxas):
    a, outs = _float_case(dtype, 256)
    ptxas(float_div_mod.compile(a, *outs, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_floats_on_the_gpu_against_torch_and_the_simulator(dtype):
    import torch
    a, outs = _float_case(dtype, 5000, "cuda")
    float_div_mod(a, *outs)
    sim_a, sim_outs = _float_case(dtype, 5000)
    float_div_mod(sim_a, *sim_outs)
    for got, sim, want in zip(outs, sim_outs, _float_want(a)):
        assert torch.equal(got.cpu(), sim)
        torch.testing.assert_close(got.cpu().double(), want.to(got.dtype).double(), rtol=0,
                                   atol=0)

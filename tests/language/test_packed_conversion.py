"""float32 narrowed to float16 / bfloat16 two elements at a time (``cvt.rn.f16x2.f32`` /
``cvt.rn.bf16x2.f32`` on sm_80+, lowering/scalar.cast_values): round to nearest even,
overflow to infinity, subnormals, signed zeros and NaN as torch converts them, in
simulation, in the PTX (assembled by ptxas) and with ``-m gpu`` on the device."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@tilejit.kernel
def narrow(A, B, dtype: T.constexpr = "float16", block_M: T.constexpr = 64,
           block_N: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        wide = T.alloc_fragment((block_M, block_N), "float32")
        half = T.alloc_fragment((block_M, block_N), dtype)
        T.copy(A[by * block_M, bx * block_N], wide)
        T.copy(wide, half)                          # fragment to fragment: slot pairs
        T.copy(half, B[by * block_M, bx * block_N])


def _inputs(dtype: str) -> torch.Tensor:
    """Random values and the cases rounding gets wrong: halfway between two neighbours
    (ties to even, either way), just past the largest finite value, subnormals of the
    narrow type, signed zeros, infinities, NaN."""
    t = DTYPES[dtype]
    info = torch.finfo(t)
    ulp1 = 2.0 ** -info.nmant if hasattr(info, "nmant") else float(info.eps)
    special = [1 + ulp1 / 2, 1 + 3 * ulp1 / 2, -(1 + ulp1 / 2), 2 + ulp1,
               float(info.max), float(info.max) * (1 + ulp1 / 4), float(info.max) * 1.01,
               float(info.tiny), float(info.tiny) / 3, float(info.tiny) / 1024, 1e-30,
               0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.5, 65504.0, 65520.0]
    g = torch.Generator().manual_seed(7)
    a = torch.randn(128, 192, generator=g) * torch.logspace(-6, 6, 192)
    a.view(-1)[:len(special)] = torch.tensor(special)
    a.view(-1)[1000:1000 + len(special)] = torch.tensor(special)     # odd positions too
    a.view(-1)[2001:2001 + len(special)] = torch.tensor(special)
    return a


def _check(out: torch.Tensor, a: torch.Tensor, dtype: str):
    want = a.to(DTYPES[dtype])
    nan = want.isnan()
    assert torch.equal(out.isnan(), nan)
    bits = torch.int16
    assert torch.equal(out[~nan].view(bits), want[~nan].view(bits))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_in_simulation(dtype):
    a = _inputs(dtype)
    b = torch.zeros(a.shape, dtype=DTYPES[dtype])
    narrow(a, b, dtype=dtype)
    _check(b, a, dtype)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_ptx_converts_in_pairs(dtype, arch, ptxas):
    a = np.zeros((128, 192), np.float32)
    b = torch.zeros(128, 192, dtype=DTYPES[dtype])
    ptx = narrow.compile(a, b, dtype=dtype, target="cuda", arch=arch).ptx
    packed = "cvt.rn.f16x2.f32" if dtype == "float16" else "cvt.rn.bf16x2.f32"
    # 64x64 elements over 128 threads: 32 a thread, 16 pairs; the interior path's
    assert ptx.count(packed) >= 16
    if dtype == "bfloat16":        # not the integer rounding sequence (sm_75's: + 0x7FFF)
        assert "32767" not in ptx
    ptxas(ptx, arch)


def test_sm75_rounds_bfloat16_without_the_instruction(ptxas):
    a = np.zeros((128, 192), np.float32)
    b = torch.zeros(128, 192, dtype=torch.bfloat16)
    ptx = narrow.compile(a, b, dtype="bfloat16", target="cuda", arch="sm_75").ptx
    assert "bf16x2" not in ptx and "32767" in ptx
    ptxas(ptx, "sm_75")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_on_the_gpu(dtype):
    a = _inputs(dtype)
    b = torch.zeros(a.shape, dtype=DTYPES[dtype], device="cuda")
    narrow(a.cuda(), b, dtype=dtype)
    torch.cuda.synchronize()
    _check(b.cpu(), a, dtype)
    sim = torch.zeros(a.shape, dtype=DTYPES[dtype])
    narrow(a, sim, dtype=dtype)
    keep = ~sim.isnan()
    assert torch.equal(b.cpu().view(torch.int16)[keep], sim.view(torch.int16)[keep])

"""T.gemm on float8 (e4m3, e5m2, fp32 accumulate): wgmma k32 on sm_90a, mma.sync m16n8k32
on sm_89/sm_90, a clear error where neither exists; the simulator's gemm as the meaning."""
import os
import sys

import pytest
import torch

import tilejit
import tilejit.language as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from gemm_fp8 import matmul_fp8, reference  # noqa: E402

TORCH = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def _gemm_nt(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
             block_K: T.constexpr = 64, threads: T.constexpr = 256,
             stages: T.constexpr = 3, trans_B: T.constexpr = True):
    M, K = A.shape
    N = B.shape[0] if trans_B else B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_N, block_K) if trans_B else (block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            if trans_B:
                T.copy(B[bx * block_N, k * block_K], B_s)
            else:
                T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=trans_B)
        T.copy(C_f, C[by * block_M, bx * block_N])


gemm_nt = tilejit.kernel(_gemm_nt)
gemm_nt_sim = tilejit.kernel(_gemm_nt, target="sim")
gemm_nt_sm90 = tilejit.kernel(arch="sm_90")(_gemm_nt)     # mma.sync's float8 form on an H100/H200


def _inputs(M, N, K, ta="float8_e4m3", tb="float8_e4m3", device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 2).to(TORCH[ta]).to(device)
    b = (torch.randn(N, K, generator=g) * 2).to(TORCH[tb]).to(device)
    return a, b


def _ref(a, b):
    return a.cpu().double() @ b.cpu().double().T


def assert_wgmma_accumulation(got, a, b, scale=1.0, out_ulp=0.0, want=None):
    """wgmma's float8 products are exact, but its accumulator keeps about 14 bits between
    the k32 instructions (DeepSeek-V3's report on Hopper's FP8 tensor cores), where
    mma.sync and the simulator sum in float32. The bound: 2^-13 of the sum of |products|
    per instruction, plus ``out_ulp`` units in the last place of C's type."""
    a64, b64 = a.cpu().double(), b.cpu().double()
    want = (a64 @ b64.T) * scale if want is None else want.cpu().double()
    magnitude = (a64.abs() @ b64.abs().T) * abs(scale)
    bound = (a.shape[1] / 32 + 1) * 2.0 ** -13 * magnitude + out_ulp * want.abs() + 1e-6
    err = (got.cpu().double() - want).abs()
    assert (err <= bound).all(), (f"max error {err.max().item():.3g}, "
                                  f"worst error/bound {(err / bound).max().item():.3g}")


@pytest.mark.parametrize("ta,tb", [("float8_e4m3", "float8_e4m3"), ("float8_e5m2", "float8_e4m3"),
                                   ("float8_e5m2", "float8_e5m2")])
def test_simulation_against_float64(ta, tb):
    a, b = _inputs(200, 136, 192, ta, tb)         # not multiples of the blocks
    c = torch.empty(200, 136)
    gemm_nt(a, b, c, block_M=64, block_N=64, block_K=64, threads=128)
    # float8 products are exact in float32; the sums round there
    torch.testing.assert_close(c.double(), _ref(a, b), rtol=1e-5, atol=1e-3)


def test_example_in_simulation():
    a, b = _inputs(256, 256, 256)
    c = torch.empty(256, 256, dtype=torch.bfloat16)
    matmul_fp8(a, b, c, 0.5, sms=3)
    torch.testing.assert_close(c.double(), reference(a, b, 0.5).double(), rtol=8e-3, atol=1e-2)


def test_example_ptx_on_hopper_is_wgmma_warp_specialized(ptxas):
    a, b = _inputs(4096, 4096, 4096)
    c = torch.empty(4096, 4096, dtype=torch.bfloat16)
    ptx = matmul_fp8.compile(a, b, c, 1.0, target="cuda", arch="sm_90a").ptx
    for must in ("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", "setmaxnreg",
                 "cp.async.bulk.tensor", "mbarrier.try_wait"):
        assert must in ptx, must
    assert "mma.sync" not in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_mma_sync_float8_on_ada(arch, ptxas):
    a, b = _inputs(256, 256, 256, "float8_e5m2", "float8_e4m3")
    ptx = gemm_nt.compile(a, b, torch.empty(256, 256), target="cuda", arch=arch,
                          threads=128).ptx
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32" in ptx
    assert ".version 8.4" in ptx
    ptxas(ptx, arch)


def test_no_float8_tensor_cores_is_an_error():
    a, b = _inputs(128, 128, 128)
    with pytest.raises(tilejit.CompileError, match=r"needs float8 tensor cores.*sm_80"):
        gemm_nt.compile(a, b, torch.empty(128, 128), target="cuda", arch="sm_80")


def test_mn_major_float8_on_sm90a_is_an_error():
    a, _ = _inputs(128, 128, 128)
    b = torch.zeros(128, 128, dtype=torch.float8_e4m3fn)          # (K, N)
    with pytest.raises(tilejit.CompileError, match=r"K-major .*transpose_B=True") as e:
        gemm_nt.compile(a, b, torch.empty(128, 128), target="cuda", arch="sm_90a",
                        trans_B=False)
    assert "T.gemm(A_s, B_s, C_f, transpose_B=trans_B)" in str(e.value)


@pytest.mark.gpu
@pytest.mark.parametrize("ta,tb", [("float8_e4m3", "float8_e4m3"), ("float8_e5m2", "float8_e4m3")])
def test_gemm_on_gpu_against_float64_and_simulator(ta, tb):
    a, b = _inputs(456, 392, 320, ta, tb, seed=3)
    c = torch.empty(456, 392, device="cuda")
    gemm_nt(a.cuda(), b.cuda(), c)               # wgmma on the H200
    assert_wgmma_accumulation(c, a, b)
    c_sim = torch.empty(456, 392)
    gemm_nt_sim(a, b, c_sim)
    torch.testing.assert_close(c_sim.double(), _ref(a, b), rtol=1e-5, atol=1e-3)
    assert_wgmma_accumulation(c, a, b, want=c_sim)


@pytest.mark.gpu
def test_mma_sync_float8_on_gpu():
    a, b = _inputs(384, 256, 256, "float8_e4m3", "float8_e5m2", seed=4)
    c = torch.empty(384, 256, device="cuda")
    gemm_nt_sm90(a.cuda(), b.cuda(), c, threads=128)
    torch.testing.assert_close(c.cpu().double(), _ref(a, b), rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
def test_example_on_gpu():
    a, b = _inputs(1000, 1536, 768, seed=5)
    c = torch.empty(1000, 1536, dtype=torch.bfloat16, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    matmul_fp8(a.cuda(), b.cuda(), c, 0.125, sms=sms)
    assert_wgmma_accumulation(c, a, b, 0.125, out_ulp=2.0 ** -8)    # bf16: half an ulp

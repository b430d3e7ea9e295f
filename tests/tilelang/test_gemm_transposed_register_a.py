"""T.gemm with A held in registers and ``transpose_A`` (Mamba3's MIMO scan:
``T.gemm(k_state_frag, PsiV_shared, states_frag, transpose_A=True)``): the fragment holds
A^T, laid out as the A operand's layout transposed (``Fragment.transposed``), so the
tensor cores read the same registers (ir/gemm_plan.a_fragment; mma.sync's slot lookup
at (k, m), lowering/gemm.py; wgmma reads its registers by slot)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[-1])
def kt_v(M=32, N=32, P=64, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(Kt: T.Tensor((M, N), dtype), Vs: T.Tensor((M, P), dtype),
             S: T.Tensor((N, P), "float32")):
        with T.Kernel(1, threads=threads):
            k_frag = T.alloc_fragment((M, N), dtype)
            v_shared = T.alloc_shared((M, P), dtype)
            acc = T.alloc_fragment((N, P), "float32")
            T.copy(Kt, k_frag)
            T.copy(Vs, v_shared)
            T.gemm(k_frag, v_shared, acc, transpose_A=True, clear_accum=True)
            T.copy(acc, S)
    return main


CASES = [(32, 32, 64, "bfloat16", 128), (64, 64, 64, "float16", 128),
         (64, 128, 32, "float16", 256)]
# on sm_90a the two larger take wgmma with A from registers, the first mma.sync
WGMMA_ON_SM90 = {(64, 64, 64, "float16", 128), (64, 128, 32, "float16", 256)}


def _inputs(M, N, P, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    return torch.randn(M, N, generator=g).to(dt), torch.randn(M, P, generator=g).to(dt)


@pytest.mark.parametrize("M, N, P, dtype, threads", CASES)
def test_simulated_matches_float64(M, N, P, dtype, threads):
    k, v = _inputs(M, N, P, dtype)
    got = kt_v(M, N, P, dtype, threads)(k, v)
    torch.testing.assert_close(got.double(), k.double().T @ v.double(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("M, N, P, dtype, threads", CASES)
def test_the_ptx_uses_the_tensor_cores_and_assembles(M, N, P, dtype, threads, arch, ptxas):
    ptx = kt_v(M, N, P, dtype, threads).get_kernel_source(arch=arch)
    wgmma = arch == "sm_90a" and (M, N, P, dtype, threads) in WGMMA_ON_SM90
    assert ("wgmma.mma_async" if wgmma else "mma.sync") in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("M, N, P, dtype, threads", CASES)
def test_on_gpu_against_float64_and_the_simulator(M, N, P, dtype, threads):
    k, v = _inputs(M, N, P, dtype, seed=1)
    got = kt_v(M, N, P, dtype, threads)(k.cuda(), v.cuda()).cpu()
    want = k.double().T @ v.double()
    torch.testing.assert_close(got.double(), want, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(got, kt_v(M, N, P, dtype, threads)(k, v), rtol=1e-4,
                               atol=1e-4)

"""Plans that would hand ptxas more live wgmma accumulator registers than a thread has
(a fuzz round's finds): a 256 x 224 GEMM tile on 512 threads (128 registers a thread,
112 accumulator words a wgmma cannot spill) stays on mma.sync (ir/gemm_plan._wgmma);
FlashAttention at block 256 x 128, head 128, 512 threads, keeps its registers without a
producer warpgroup (passes/warp_specialize.py: the consumers' fragments together)."""
import os
import sys

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                "flash_attention"))
from flash_attn import flashattn  # noqa: E402


@tilejit.kernel
def mm(A, B, C, bM: T.constexpr = 256, bN: T.constexpr = 224, bK: T.constexpr = 32):
    with T.Kernel(T.ceildiv(B.shape[1], bN), T.ceildiv(A.shape[0], bM), threads=512) as (
            bx, by):
        A_s = T.alloc_shared((bM, bK), A.dtype)
        B_s = T.alloc_shared((bK, bN), B.dtype)
        C_f = T.alloc_fragment((bM, bN), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(A.shape[1], bK), num_stages=0):
            T.copy(A[by * bM, k * bK], A_s)
            T.copy(B[k * bK, bx * bN], B_s)
            T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)
        T.copy(C_f, C[by * bM, bx * bN])


def _mm_args(device="cpu"):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(256, 64, generator=g).bfloat16().to(device),
            torch.randn(64, 224, generator=g).bfloat16().to(device),
            torch.zeros(256, 224, device=device))


def test_the_wide_tile_stays_on_mma_sync_and_assembles(ptxas):
    ptx = mm.compile(*_mm_args(), target="cuda", arch="sm_90a").ptx
    assert "wgmma.mma_async" not in ptx and "mma.sync" in ptx
    ptxas(ptx, "sm_90a")


def test_the_wide_flash_attention_tile_assembles(ptxas):
    q = torch.zeros(1, 300, 1, 128, dtype=torch.float16)
    ptx = flashattn.compile(q, q, q, q.clone(), None, target="cuda", arch="sm_90a",
                            is_causal=False, block_M=256, block_N=128, num_stages=2,
                            threads=512).ptx
    assert "setmaxnreg" not in ptx          # no producer warpgroup
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_the_wide_tile_on_the_gpu_against_float64_and_the_simulator():
    a, b, c = _mm_args("cuda")
    mm(a, b, c)
    want = a.cpu().double() @ b.cpu().double()
    np.testing.assert_allclose(c.cpu().numpy(), want.numpy(), rtol=1e-3, atol=1e-3)
    sa, sb, sc = _mm_args()
    mm(sa, sb, sc)
    torch.testing.assert_close(c.cpu(), sc, rtol=1e-4, atol=1e-4)

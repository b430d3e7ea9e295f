"""TileLang's explicit Hopper gemm, ``T.wgmma_gemm`` with ``T.wait_wgmma(n)`` and
``T.warpgroup_fence_operand``: the same product as ``T.gemm`` (which waits where the
products are first needed, so the wait and the fence add nothing), on wgmma on sm_90a, in
the simulator and on the GPU."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def explicit_wgmma(A, B, C, fence: T.constexpr = True):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), A.dtype)
        B_s = T.alloc_shared((32, 64), B.dtype)
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
            T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)
            T.wgmma_gemm(A_s, B_s, C_f)
            T.wait_wgmma(0)
            if fence:
                T.warpgroup_fence_operand(C_f, num_regs=32)
        T.copy(C_f, C[by * 64, bx * 64])


@tilejit.kernel
def fences_a_number(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_f)
        T.warpgroup_fence_operand(64)
        T.copy(C_f, C)


def _operands(m=128, n=128, k=96):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def test_it_is_the_product_in_the_simulator():
    a, b, ref = _operands()
    c = np.zeros(ref.shape, np.float32)
    tilejit.kernel(explicit_wgmma.func, target="sim")(a, b, c)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_it_runs_on_wgmma_on_sm_90a(ptxas):
    a, b, ref = _operands()
    ptx = explicit_wgmma.compile(a, b, np.zeros(ref.shape, np.float32), target="cuda",
                                 arch="sm_90a").ptx
    assert "wgmma.mma_async" in ptx and "wgmma.wait_group.sync.aligned" in ptx
    ptxas(ptx, "sm_90a")


def test_the_fence_changes_nothing(ptxas):
    a, b, ref = _operands()
    c = np.zeros(ref.shape, np.float32)
    fenced = explicit_wgmma.compile(a, b, c, target="cuda", arch="sm_90a").ptx
    bare = explicit_wgmma.compile(a, b, c, fence=False, target="cuda", arch="sm_90a").ptx
    assert fenced == bare


def test_the_fence_needs_a_fragment():
    z = np.zeros((64, 64), np.float32)
    with pytest.raises(CompileError, match=r"T.warpgroup_fence_operand\(buffer, offset, "
                                           r"num_regs\): expected a wgmma accumulator "
                                           r"fragment .*got `T.warpgroup_fence_operand\(64\)`"):
        tilejit.kernel(fences_a_number.func, target="sim")(z, z, z)
    with pytest.raises(TypeError, match="num_regs must be a positive int, got 0"):
        T.warpgroup_fence_operand(None, num_regs=0)


def test_a_wait_needs_a_count():
    with pytest.raises(TypeError, match=r"T.wait_wgmma\(id\): id must be a non-negative int, "
                                        r"got -1"):
        T.wait_wgmma(-1)


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    a, b, ref = _operands()
    c = torch.zeros(ref.shape, device="cuda")
    explicit_wgmma(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    sim = np.zeros(ref.shape, np.float32)
    tilejit.kernel(explicit_wgmma.func, target="sim")(a, b, sim)
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(c.cpu().numpy(), sim, rtol=1e-5, atol=1e-4)

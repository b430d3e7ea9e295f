"""TileLang's explicit TMA store: ``T.tma_copy(S, C[i, j])`` without a barrier (a shared
tile to a tensor) and ``T.tma_store_wait(count, read)``, in a GEMM whose loads are explicit too
(``T.tma_copy(..., barrier=)``, ``T.barrier_arrive``, ``T.mbarrier_wait_parity`` in a
``T.Pipelined`` loop), written as TileLang's users write it (the TileLang door,
``pass_configs``): the store is a TMA store on sm_90a (``cp.async.bulk.tensor …
global.shared::cta`` and its read wait), the simulator's result is the float64
product's, and a malformed call is a CompileError at its line."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def gemm_tma(M, N, K, block_M=128, block_N=128, block_K=32, stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_s = T.alloc_shared((block_M, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            bar_a = T.alloc_barrier(128)
            bar_b = T.alloc_barrier(128)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.tma_copy(A[by * block_M, k * block_K], A_s, barrier=bar_a)
                T.barrier_arrive(bar_a)
                T.tma_copy(B[k * block_K, bx * block_N], B_s, barrier=bar_b)
                T.barrier_arrive(bar_b)
                T.mbarrier_wait_parity(bar_a, k % 2)
                T.mbarrier_wait_parity(bar_b, k % 2)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.tma_copy(C_s, C[by * block_M, bx * block_N])
            T.tma_store_arrive()
            T.tma_store_wait(0, read=False)
    return main


CONFIGS = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _reference(a, b):
    return (a.double() @ b.double()).to(torch.float16)


def test_the_gemm_in_the_simulator():
    torch.manual_seed(0)
    a, b = torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 256, dtype=torch.float16)
    kernel = tilelang.compile(gemm_tma(256, 256, 128), out_idx=[2], target="sim",
                              pass_configs=CONFIGS)
    torch.testing.assert_close(kernel(a, b), _reference(a, b), atol=1e-2, rtol=1e-2)


def test_the_store_is_a_tma_store_on_sm_90a(ptxas):
    kernel = tilelang.compile(gemm_tma(256, 256, 128), out_idx=[2], target="cuda",
                              pass_configs=CONFIGS)
    ptx = kernel.get_kernel_source()
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    assert "cp.async.bulk.wait_group.read 0" in ptx
    assert "mbarrier.expect_tx" in ptx              # the explicit loads
    ptxas(ptx, "sm_90a")


def test_a_store_wait_takes_count_and_read_only(tmp_path):
    """TileLang's ``T.tma_store_wait(count=0, read=True)``: both taken (the compiler waits
    for every store itself); any other argument is an error at its line."""
    source = tmp_path / "k.py"
    source.write_text('''import tilejit
import tilejit.language as T


@tilejit.kernel
def k(X, Y):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((128,), "float32")
        T.copy(X[0:128], S)
        T.tma_copy(S, Y[0:128])
        T.tma_store_wait(0, read=False, fence=True)
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_tma_store", source)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(CompileError, match=r"T.tma_store_wait\(count, read\) takes these "
                                           r"arguments") as info:
        spec.loader.exec_module(module)
    assert "line 11" in str(info.value)


@pytest.mark.gpu
def test_on_the_gpu_against_float64_and_the_simulator():
    torch.manual_seed(1)
    a = torch.randn(512, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 384, dtype=torch.float16, device="cuda")
    for stages in (2, 3):
        kernel = tilelang.compile(gemm_tma(512, 384, 256, stages=stages), out_idx=[2],
                                  pass_configs=CONFIGS)
        c = kernel(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, _reference(a, b), atol=1e-2, rtol=1e-2)
    sim = tilelang.compile(gemm_tma(512, 384, 256), out_idx=[2], target="sim",
                           pass_configs=CONFIGS)
    torch.testing.assert_close(c.cpu(), sim(a.cpu(), b.cpu()), atol=1e-2, rtol=1e-2)
    assert np.isfinite(c.float().cpu().numpy()).all()

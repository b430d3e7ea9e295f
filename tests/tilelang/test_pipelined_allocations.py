"""Tiles allocated inside a ``T.Pipelined`` loop's body, as TileLang's GEMV example
(``gemv_alloc_reducer``) writes them: TileLang allocates them once for the block, so the
loop's prologue, which fills the first stages before the loop runs, may copy into them
(passes/pipeline.py names them before the prologue)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def gemv(a, x, block_M=64, block_N=64, num_stages=2, threads=128,
         dtype: T.dtype = T.float16, accum_dtype: T.dtype = T.float32):
    M, N = T.const("M, N")
    a: T.Tensor((M, N), dtype)
    x: T.Tensor((N,), dtype)
    o = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
        acc = T.alloc_fragment((block_M,), accum_dtype)
        T.clear(acc)
        for kn in T.Pipelined(T.ceildiv(N, block_N), num_stages=num_stages):
            a_smem = T.alloc_shared((block_M, block_N), dtype)
            T.copy(a[bm * block_M, kn * block_N], a_smem)
            a_frag = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(a_smem, a_frag)
            x_frag = T.alloc_fragment(block_N, dtype)
            T.copy(x[kn * block_N], x_frag)
            prod = T.alloc_fragment((block_M, block_N), accum_dtype)
            for i, j in T.Parallel(block_M, block_N):
                prod[i, j] = a_frag[i, j] * x_frag[j]
            T.reduce_sum(prod, acc, dim=1, clear=False)
        T.copy(acc, o[bm * block_M])
    return o


def reference(a, x):
    return (a.double() @ x.double())


def test_in_simulation_against_torch():
    a = torch.randn(128, 256, dtype=torch.float16)
    x = torch.randn(256, dtype=torch.float16)
    out = gemv.compile(M=128, N=256, target="sim")(a, x)
    torch.testing.assert_close(out.double(), reference(a, x), atol=2e-2, rtol=2e-2)


def test_the_ptx_pipelines_the_copy_and_assembles(ptxas):
    ptx = gemv.compile(M=128, N=256).get_kernel_source()
    assert "cp.async" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    a = torch.randn(256, 512, dtype=torch.float16)
    x = torch.randn(512, dtype=torch.float16)
    got = gemv.compile(M=256, N=512)(a.cuda(), x.cuda()).cpu()
    torch.testing.assert_close(got.double(), reference(a, x), atol=2e-2, rtol=2e-2)
    sim = gemv.compile(M=256, N=512, target="sim")(a, x)
    torch.testing.assert_close(got, sim, atol=2e-3, rtol=2e-3)

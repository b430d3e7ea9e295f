"""``for i, j in T.grid(m, n)``: TileLang's nested sequential loops (the last index
innermost), as its SIMT GEMM test accumulates a thread's micro-tile
(frontend/rewrite.py writes them as nested ``range`` loops)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def micro_tiles(M=64, N=64, K=32, tm=4, tn=4):
    threads = (M // tm) * (N // tn)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            acc = T.alloc_local((tm, tn), "float32")
            row0 = (tx // (N // tn)) * tm
            col0 = (tx % (N // tn)) * tn
            for i, j in T.grid(tm, tn):
                acc[i, j] = 0.0
            for k in T.serial(K):
                for i, j in T.grid(tm, tn):
                    acc[i, j] += A[row0 + i, k] * B[k, col0 + j]
            for i, j in T.grid(tm, tn):
                C[row0 + i, col0 + j] = acc[i, j]
    return main


def test_in_simulation_against_torch():
    a, b, c = torch.randn(64, 32), torch.randn(32, 64), torch.zeros(64, 64)
    tilelang.compile(micro_tiles(), target="sim")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-4, rtol=1e-4)


def test_outside_a_kernel_it_is_the_nested_loops():
    assert list(T.grid(2, 3)) == [(i, j) for i in range(2) for j in range(3)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(micro_tiles()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    a, b = torch.randn(64, 32), torch.randn(32, 64)
    c = torch.zeros(64, 64, device="cuda")
    tilelang.compile(micro_tiles())(a.cuda(), b.cuda(), c)
    sim = torch.zeros(64, 64)
    tilelang.compile(micro_tiles(), target="sim")(a, b, sim)
    torch.testing.assert_close(c.cpu().double(), a.double() @ b.double(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(c.cpu(), sim, atol=1e-5, rtol=1e-5)

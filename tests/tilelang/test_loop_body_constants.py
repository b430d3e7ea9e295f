"""A name assigned once in a loop's body from compile-time values is one (passes/
static_eval.py): a quantized-GEMM library computes a T.Parallel's extent so inside its
T.Pipelined body (`packed_k_size = (block_K + 1) // 2`)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def staged_copy(N=64, BK=128, KT=2):
    @T.prim_func
    def main(X: T.Tensor((N, KT * BK // 2), "int8"), Y: T.Tensor((N, KT * BK // 2), "int8")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((N, BK // 2), "int8")
            for k in T.Pipelined(KT, num_stages=1):
                size = (BK + 1) // 2
                for i, j in T.Parallel(N, size):
                    n = bx * N + i
                    S[i, j] = T.if_then_else(n < N, X[n, k * size + j], 0)
                for i, j in T.Parallel(N, BK // 2):
                    n = bx * N + i
                    Y[n, k * (BK // 2) + j] = S[i, j]
    return main


def test_a_loop_extent_computed_in_the_pipelined_body():
    x = torch.randint(-100, 100, (64, 128), dtype=torch.int8)
    y = torch.zeros_like(x)
    staged_copy()(x, y)
    assert torch.equal(y, x)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(staged_copy().get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x = torch.randint(-100, 100, (64, 128), dtype=torch.int8)
    y = torch.zeros_like(x, device="cuda")
    staged_copy()(x.cuda(), y)
    sim = torch.zeros_like(x)
    staged_copy()(x, sim)
    assert torch.equal(y.cpu(), x) and torch.equal(sim, x)

"""``T.dp4a(A[i, k], B[j, k], C[n])``: four int8 products summed into an int32, as
TileLang's SIMT int8 GEMM accumulates a thread's micro-tile (the front end writes the
multiply-adds: frontend/rewrite._dp4a_loop)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

M, N, K = 16, 16, 32


def dp4a_gemm():
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"),
             C: T.Tensor((M, N), "int32")):
        with T.Kernel(1, threads=M * N):
            tid = T.get_thread_binding()
            i = tid // N
            j = tid % N
            acc = T.alloc_local((1,), "int32")
            a = T.alloc_local((K,), "int8")
            b = T.alloc_local((K,), "int8")
            acc[0] = 0
            for k in T.serial(K):
                a[k] = A[i, k]
                b[k] = B[j, k]
            for k in T.serial(K // 4):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[i, j] = acc[0]
    return main


def reference(a, b):
    return (a.long() @ b.long().T).int()


def test_in_simulation_against_torch():
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32)
    tilelang.compile(dp4a_gemm(), target="sim")(a, b, c)
    assert torch.equal(c, reference(a, b))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(dp4a_gemm()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch():
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32, device="cuda")
    tilelang.compile(dp4a_gemm())(a.cuda(), b.cuda(), c)
    assert torch.equal(c.cpu(), reference(a, b))

"""``T.gemm`` with a float32 (tf32) A operand held in a fragment, as TileLang's mHC
pre-block and GDN examples write it: on mma.sync m16n8k8 the A fragment takes the
instruction's own A layout (a thread holds columns t and t + 4; GemmPlan.a_fragment),
and each register is read from its slot (lowering/gemm._a_registers)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def gemm_a_in_registers(M, N, K, bm=32, bn=32, bk=32, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            A_f = T.alloc_fragment((bm, bk), "float32")
            B_s = T.alloc_shared((bn, bk), "float32")
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.copy(A_s, A_f)
                for i, j in T.Parallel(bm, bk):
                    A_f[i, j] = A_f[i, j] * 0.5
                T.gemm(A_f, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def reference(a, b):
    return 0.5 * a.double() @ b.double().T


def test_in_simulation_against_torch():
    a, b = torch.randn(64, 96), torch.randn(64, 96)
    c = torch.zeros(64, 64)
    tilelang.compile(gemm_a_in_registers(64, 64, 96), target="sim")(a, b, c)
    torch.testing.assert_close(c.double(), reference(a, b), atol=3e-2, rtol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_uses_tf32_mma_and_assembles(arch, ptxas):
    ptx = tilelang.compile(gemm_a_in_registers(64, 64, 96)).get_kernel_source(arch=arch)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,tiles", [((128, 128, 128), (32, 32, 32, 128)),
                                         ((128, 64, 64), (64, 32, 16, 128)),
                                         ((64, 128, 64), (16, 64, 32, 64))])
def test_on_gpu_against_torch_and_simulator(shape, tiles):
    M, N, K = shape
    bm, bn, bk, threads = tiles
    a, b = torch.randn(M, K), torch.randn(N, K)
    prog = gemm_a_in_registers(M, N, K, bm, bn, bk, threads)
    c = torch.zeros(M, N, device="cuda")
    tilelang.compile(prog)(a.cuda(), b.cuda(), c)
    sim = torch.zeros(M, N)
    tilelang.compile(prog, target="sim")(a, b, sim)
    torch.testing.assert_close(c.cpu().double(), reference(a, b), atol=5e-2, rtol=1e-2)
    torch.testing.assert_close(c.cpu(), sim, atol=5e-2, rtol=1e-2)

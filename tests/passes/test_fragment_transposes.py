"""A ``T.Parallel`` that writes or reads a fragment with the loop's indices in another
order, as TileLang's GDN kernels transpose ``Q_fragment`` for a gemm: through a shared
scratch tile (passes/fragment_transposes.py); the simulator runs the loop as written."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

M, N = 64, 32


def transposes(threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32"),
             C: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), "float32")
            Ft = T.alloc_fragment((N, M), "float32")
            G = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(A, F)
            for i, j in T.Parallel(M, N):       # a transposed write
                Ft[j, i] = F[i, j] * 2
            T.copy(Ft, B)
            for i, j in T.Parallel(M, N):       # a transposed read
                G[i, j] = Ft[j, i] + 1
            T.reduce_sum(G, r, dim=1)
            T.copy(r, C)
    return main


def reference(a):
    return 2 * a.double().T, (2 * a.double() + 1).sum(1)


def test_in_simulation_against_torch():
    a, b, c = torch.randn(M, N), torch.zeros(N, M), torch.zeros(M)
    tilelang.compile(transposes(), target="sim")(a, b, c)
    rb, rc = reference(a)
    torch.testing.assert_close(b.double(), rb)
    torch.testing.assert_close(c.double(), rc, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_goes_through_shared_memory_and_assembles(arch, ptxas):
    ptx = tilelang.compile(transposes()).get_kernel_source(arch=arch)
    assert "st.shared" in ptx and "bar.sync" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [128, 256])
def test_on_gpu_against_torch_and_simulator(threads):
    a = torch.randn(M, N)
    b, c = torch.zeros(N, M, device="cuda"), torch.zeros(M, device="cuda")
    tilelang.compile(transposes(threads))(a.cuda(), b, c)
    sb, sc = torch.zeros(N, M), torch.zeros(M)
    tilelang.compile(transposes(threads), target="sim")(a, sb, sc)
    rb, rc = reference(a)
    torch.testing.assert_close(b.cpu().double(), rb)
    torch.testing.assert_close(c.cpu().double(), rc, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(b.cpu(), sb)
    torch.testing.assert_close(c.cpu(), sc, atol=1e-5, rtol=1e-5)


def test_a_transposed_write_under_a_branch_iterates_in_the_written_order(ptxas):
    """The loop writes only Ft, at [k, i]: it runs in Ft's order (k, i), where the
    branch skips Ft's own elements, and reads F through the transposing scratch (a
    scratch for the write would copy back elements the branch skipped)."""
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float32"), B: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((16, 32), "float32")
            Ft = T.alloc_fragment((32, 16), "float32")
            T.copy(A, F)
            T.fill(Ft, 7.0)
            for i, k in T.Parallel(16, 32):
                if i < 4:
                    Ft[k, i] = F[i, k]
            T.copy(Ft, B)
    a, b = torch.randn(16, 32), torch.zeros(32, 16)
    tilelang.compile(main)(a, b)
    want = torch.full((32, 16), 7.0)
    want[:, :4] = a[:4].T
    assert torch.equal(b, want)
    ptxas(tilelang.compile(main).get_kernel_source(arch="sm_90a"), "sm_90a")

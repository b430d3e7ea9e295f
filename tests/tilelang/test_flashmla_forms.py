"""The forms TileLang's hand-specialized FlashMLA kernel
(``examples/warp_specialize/example_warp_specialize_flashmla.py``) writes beside its
roles: a ``T.unroll`` loop whose gemms and TMA copies take a band of columns that moves
with the loop's index (``frontend/unrolled_regions.py``), TMA boxes into a band of a
tile's columns (``passes/tma.py``), a tile reused under a second name (``O_shared =
Q_shared``, ``frontend/let_bindings.py``), ``T.fence_proxy_async()``, and the register
check counting one role's fragments (``passes/registers.py``). Simulation against
float64 torch, the sm_90a PTX assembled by ptxas, a GPU twin."""
import warnings

import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.passes.registers import RegisterSpillWarning


def banded_gemm(M=64, N=64, K=256, band=64, fence=True):
    """C = A @ B^T, K in bands of ``band`` columns: the producer role TMA-copies each band
    of A and B into its place in the consumer's tiles (one mbarrier each), the consumer
    waits for each band and multiplies it; C goes out through A's tile, reused as O."""
    bands = K // band

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((N, K), T.float16)
            O_s = A_s
            acc = T.alloc_fragment((M, N), T.float32)
            out = T.alloc_fragment((M, N), T.float16)
            ready = T.alloc_barrier(arrive_count=[128] * bands)
            tx = T.get_thread_binding()
            if tx < 128:
                T.clear(acc)
                for j in T.unroll(bands):
                    T.barrier_wait(ready[j], 0)
                    T.gemm(A_s[:, j * band:(j + 1) * band], B_s[:, j * band:(j + 1) * band],
                           acc, transpose_B=True)
                T.copy(acc, out)
                T.copy(out, O_s[:, 0:N])
                if fence:
                    T.fence_proxy_async()
                T.copy(O_s[:, 0:N], C)
            else:
                for j in T.unroll(bands):
                    T.tma_copy(A[:, j * band:(j + 1) * band], A_s[:, j * band:(j + 1) * band],
                               barrier=ready[j])
                    T.tma_copy(B[:, j * band:(j + 1) * band], B_s[:, j * band:(j + 1) * band],
                               barrier=ready[j])
                    T.barrier_arrive(ready[j])

    return main


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(1)
    A = torch.randn(64, 256, generator=g).to(torch.float16)
    B = torch.randn(64, 256, generator=g).to(torch.float16)
    return A.to(device), B.to(device)


def _reference(A, B):
    return (A.double() @ B.double().T).to(torch.float16)


def test_bands_in_simulation():
    A, B = _inputs()
    C = torch.zeros(64, 64, dtype=torch.float16)
    tilejit.compile(banded_gemm(), target="sim")(A, B, C)
    torch.testing.assert_close(C, _reference(A, B), rtol=2e-3, atol=2e-3)


def test_bands_compile_for_sm_90a(ptxas):
    ptx = tilejit.compile(banded_gemm(), target="cuda -arch=sm_90a").get_kernel_source()
    assert ptx.count("cp.async.bulk.tensor.2d") == 8            # 4 bands x (A, B), unrolled
    assert "wgmma.mma_async" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    ptxas(ptx, "sm_90a")


def test_a_band_that_is_not_whole_swizzle_atoms_is_refused():
    from tilejit.errors import CompileError
    with pytest.raises(CompileError, match=r"T.tma_copy: TMA cannot copy"):
        tilejit.compile(banded_gemm(band=32), target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_bands_on_the_gpu_against_torch_and_the_simulator():
    A, B = _inputs("cuda")
    C = torch.zeros(64, 64, dtype=torch.float16, device="cuda")
    tilejit.compile(banded_gemm(), target="cuda")(A, B, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, _reference(A, B), rtol=2e-3, atol=2e-3)
    sim = torch.zeros(64, 64, dtype=torch.float16)
    tilejit.compile(banded_gemm(), target="sim")(A.cpu(), B.cpu(), sim)
    torch.testing.assert_close(C.cpu(), sim, rtol=2e-3, atol=2e-3)


def two_big_roles():
    """Each role holds its own 64x256 float32 accumulator (128 words a thread): together
    256, more than a thread's 255, but no thread holds both."""
    @T.prim_func
    def main(A: T.Tensor((64, 256), T.float32), B: T.Tensor((64, 256), T.float32)):
        with T.Kernel(1, threads=256) as _:
            left = T.alloc_fragment((64, 256), T.float32)
            right = T.alloc_fragment((64, 256), T.float32)
            tx = T.get_thread_binding()
            if tx < 128:
                T.copy(A, left)
                for i, j in T.Parallel(64, 256):
                    left[i, j] = left[i, j] * 2
                T.copy(left, A)
            else:
                T.copy(B, right)
                for i, j in T.Parallel(64, 256):
                    right[i, j] = right[i, j] + 1
                T.copy(right, B)
    return main


def test_the_register_check_counts_one_roles_fragments():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RegisterSpillWarning)
        tilejit.compile(two_big_roles(), target="cuda -arch=sm_90a").get_kernel_source()
    a, b = torch.randn(64, 256), torch.randn(64, 256)
    a0, b0 = a.clone(), b.clone()
    tilejit.compile(two_big_roles(), target="sim")(a, b)
    torch.testing.assert_close(a, 2 * a0)
    torch.testing.assert_close(b, b0 + 1)


def tail_reuse():
    """DeepSeek-V3.2's seesaw kernel writes its probabilities into the tail columns of the
    stage that holds V (``T.copy(acc_s, S_shared[s, :, D:])``) and multiplies from there:
    copies into and gemms on regions of one version of a stacked tile."""
    @T.prim_func
    def main(P: T.Tensor((2, 64, 64), T.float16), V: T.Tensor((2, 64, 64), T.float16),
             C: T.Tensor((2, 64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            R = T.alloc_shared((2, 64, 128), T.float16)
            p = T.alloc_fragment((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            for s in T.serial(2):
                T.copy(V[s, :, :], R[s, :, 0:64])
                T.copy(P[s, :, :], p)
                T.copy(p, R[s, :, 64:])
                T.clear(acc)
                T.gemm(R[s, :, 64:], R[s, :, 0:64], acc)
                T.copy(acc, C[s, :, :])
    return main


def test_regions_of_one_version_in_simulation_and_ptx(ptxas):
    g = torch.Generator().manual_seed(2)
    P = torch.randn(2, 64, 64, generator=g).to(torch.float16)
    V = torch.randn(2, 64, 64, generator=g).to(torch.float16)
    C = torch.zeros(2, 64, 64)
    tilejit.compile(tail_reuse(), target="sim")(P, V, C)
    torch.testing.assert_close(C, (P.double() @ V.double()).float(), rtol=1e-3, atol=1e-3)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(tail_reuse(), target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_regions_of_one_version_on_the_gpu():
    g = torch.Generator().manual_seed(2)
    P = torch.randn(2, 64, 64, generator=g).to(torch.float16).cuda()
    V = torch.randn(2, 64, 64, generator=g).to(torch.float16).cuda()
    C = torch.zeros(2, 64, 64, device="cuda")
    tilejit.compile(tail_reuse(), target="cuda")(P, V, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, (P.double() @ V.double()).float(), rtol=1e-3, atol=1e-3)

"""``T.annotate_layout({local: T.Fragment(...)})`` of a ``T.alloc_local`` tile (older
TileLang MLA decode kernels annotate their per-thread log-sum so): a local tile is each
thread's own array, with no layout over threads to give; the annotation is left unused,
as TileLang's layout inference (of fragments only) leaves it. A global tensor or a name
given a T.Fragment stays an error."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


def row_sums(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=128) as bx:
            acc = T.alloc_local([1], "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i: i)})
            T.clear(acc)
            for k in T.serial(N):
                acc[0] += A[bx, k]
            B[bx] = acc[0]
    return main


def test_a_local_tiles_annotation_is_left_unused():
    a = np.random.default_rng(0).standard_normal((4, 24)).astype(np.float32)
    b = np.zeros(4, np.float32)
    tilejit.compile(row_sums(4, 24), target="sim")(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_its_ptx_assembles(arch, ptxas):
    ptxas(tilejit.compile(row_sums(4, 24), target=f"cuda -arch={arch}").get_kernel_source(),
          arch)


def test_a_global_tensor_key_is_still_an_error():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            T.annotate_layout({A: T.Fragment((64,), forward_thread_fn=lambda i: i)})
            for i in T.Parallel(64):
                A[i] = 1.0

    with pytest.raises(tilejit.CompileError, match=r"T.annotate_layout: tensor 'A' takes a "
                                                   r"T.Layout, got T.Fragment"):
        tilejit.compile(main, target="cuda -arch=sm_80").get_kernel_source()


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.randn(64, 100)
    b = torch.zeros(64, device="cuda")
    tilejit.compile(row_sums(64, 100))(a.cuda(), b)
    sim = torch.zeros(64)
    tilejit.compile(row_sums(64, 100), target="sim")(a, sim)
    torch.testing.assert_close(b.cpu().double(), a.double().sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.cpu(), sim, rtol=1e-6, atol=1e-6)

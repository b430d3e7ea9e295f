"""A T.Parallel listing its indices in another order than the fragments it indexes
(DeepSeek's fp8 indexer: ``for h, i in T.Parallel(H, N): logits[i, h] = ...``) is the
fragments' loop (``passes/parallel_order.py``): in simulation, in PTX assembled by
ptxas, and on the GPU against torch and the simulator. A loop whose fragments disagree
(a transpose) keeps its order."""
import pytest
import torch

import tilejit
import tilejit.language as T


def scaled_rows(M, N, H):
    """out[i, j] = sum over h of w[h] * relu(x[i, h, j]) written with the head index first."""
    @T.prim_func
    def main(X: T.Tensor((M, H, N), "float32"), W: T.Tensor((H,), "float32"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment((M, N), "float32")
            t = T.alloc_fragment((M, N), "float32")
            T.clear(s)
            for h in T.serial(H):
                for j, i in T.Parallel(N, M):          # the fragments' (M, N), transposed
                    t[i, j] = T.max(X[i, h, j], 0.0) * W[h]
                    s[i, j] += t[i, j]
            T.copy(s, O)
    return main


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 3, 32, generator=g), torch.randn(3, generator=g)
    ref = (x.double().clamp(min=0) * w.double()[None, :, None]).sum(1).float()
    return x.to(device), w.to(device), ref


def test_a_transposed_parallel_is_the_fragments_loop():
    x, w, ref = _inputs()
    out = tilejit.compile(scaled_rows(64, 32, 3), out_idx=[2])(x, w)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_transposed_parallel_assembles(ptxas, arch):
    ptxas(tilejit.compile(scaled_rows(64, 32, 3), out_idx=[2], target=f"cuda -arch={arch}")
          .get_kernel_source(), arch)


def test_fragments_that_disagree_keep_the_order():
    """`a[i, j]` and `b[j, i]` in one loop: a transpose, not a reordering (refused where
    the fragments' layouts cannot meet, as before)."""
    @T.prim_func
    def transpose(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((32, 32), "float32")
            b = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            for j, i in T.Parallel(32, 32):
                b[j, i] = a[i, j]
            T.copy(b, B)
    x = torch.randn(32, 32)
    torch.testing.assert_close(tilejit.compile(transpose, out_idx=[1])(x), x.T.contiguous())


@pytest.mark.gpu
def test_a_transposed_parallel_on_the_gpu():
    x, w, ref = _inputs("cuda")
    kernel = tilejit.compile(scaled_rows(64, 32, 3), out_idx=[2])
    out = kernel(x, w)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu(), kernel(x.cpu(), w.cpu()), rtol=1e-6, atol=1e-6)

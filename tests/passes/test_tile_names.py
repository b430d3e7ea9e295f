"""A tile name allocated again (vllm's mHC kernel: ``ol = T.alloc_fragment(...)`` in the
bodies of two pipelined loops) names a new tile from there on, as Python rebinds it
(``passes/tile_names.py``): each allocation a tile of its own, errors showing the name as
written; in simulation, in PTX through ptxas, and on the GPU against torch and the
simulator. Allocations in the branches of an ``if`` are left to the tile allocation's
error."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def two_passes(M, N, block=64):
    """Y = rmsnorm-like: sums of squares in a first loop, scaled values in a second; both
    loops allocate `ol` (of different dtypes)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=64) as i:
            sums = T.alloc_fragment((block,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(sums)
            for b in T.Pipelined(N // block, num_stages=2):
                ol = T.alloc_fragment((block,), "float32")
                T.copy(X[i, b * block], ol)
                for j in T.Parallel(block):
                    sums[j] += ol[j] * ol[j]
            T.reduce_sum(sums, total, dim=0)
            for b in T.Pipelined(N // block, num_stages=2):
                ol = T.alloc_fragment((block,), "float16")
                for j in T.Parallel(block):
                    ol[j] = X[i, b * block + j] * W[b * block + j] * T.rsqrt(total[0] / N)
                for j in T.Parallel(block):
                    Y[i, b * block + j] = ol[j]
    return main


def _reference(x, w):
    x64 = x.double()
    return (x64 * w.double() / x64.pow(2).mean(1, keepdim=True).sqrt()).half().float()


def test_a_name_allocated_again_is_a_tile_of_its_own(ptxas):
    x, w = torch.randn(4, 256), torch.randn(256)
    y = tilejit.compile(two_passes(4, 256), out_idx=[2])(x, w)
    torch.testing.assert_close(y, _reference(x, w), rtol=2e-3, atol=2e-3)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(two_passes(4, 256), out_idx=[2], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


def test_an_error_names_the_tile_as_written():
    @T.prim_func
    def bad(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            ol = T.alloc_fragment((64,), "float32")
            T.copy(X, ol)
            ol = T.alloc_fragment((64,), "float32")
            for j in T.Parallel(128):
                ol[j] = 1.0
            T.copy(ol, X)
    with pytest.raises(CompileError) as info:
        tilejit.compile(bad, target="cuda -arch=sm_90a").get_kernel_source()
    assert "fragment 'ol'" in str(info.value) and "__tj_" not in str(info.value)


def test_allocations_in_the_branches_of_an_if_are_refused():
    @T.prim_func
    def branches(X: T.Tensor((64,), "float32"), flag: T.int32):
        with T.Kernel(1, threads=64):
            if flag > 0:
                t = T.alloc_fragment((64,), "float32")
            else:
                t = T.alloc_fragment((64,), "float32")
            T.copy(X, t)
    with pytest.raises(CompileError, match=r"tile 't' is allocated twice"):
        tilejit.compile(branches, target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_gpu_a_name_allocated_again_is_a_tile_of_its_own():
    x, w = torch.randn(64, 1024), torch.randn(1024)
    kernel = tilejit.compile(two_passes(64, 1024), out_idx=[2])
    y = kernel(x.cuda(), w.cuda()).cpu()
    torch.testing.assert_close(y, _reference(x, w), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(y, kernel(x, w), rtol=1e-3, atol=1e-3)

"""A one-index T.Parallel reading its index split in two (``F[i // c, i % c]``) runs as
the two-index loop it walks (frontend/fused_indices.py): in simulation against torch,
PTX assembled by ptxas, with ``-m gpu`` against the simulator; where ``c`` does not
divide the extent the loop stays and the fragment's index is refused as before."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def flatten(bm, bn, extent=None):
    extent = extent or bm * bn

    @T.prim_func
    def main(A: T.Tensor((bm, bn), "float32"), B: T.Tensor((extent,), "float32")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((bm, bn), "float32")
            B_local = T.alloc_fragment((extent,), "float32")
            T.copy(A, A_local)
            for i in T.Parallel(extent):
                B_local[i] = A_local[i // bn, i % bn] * 2 + i
            T.copy(B_local, B)
    return main


@pytest.mark.parametrize("bm, bn", [(32, 32), (16, 64), (64, 8)])
def test_in_simulation(bm, bn, ptxas):
    a = torch.randn(bm, bn)
    kernel = tilelang.compile(flatten(bm, bn), out_idx=[1])
    torch.testing.assert_close(kernel(a), a.reshape(-1) * 2 + torch.arange(bm * bn))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_a_split_that_does_not_divide_the_extent_stays():
    with pytest.raises(tilelang.CompileError, match="not the T.Parallel's own"):
        tilelang.compile(flatten(32, 32, extent=1000), out_idx=[1])


@pytest.mark.gpu
@pytest.mark.parametrize("bm, bn", [(32, 32), (16, 64)])
def test_gpu_matches_the_simulator(bm, bn):
    a = torch.randn(bm, bn)
    kernel = tilelang.compile(flatten(bm, bn), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))

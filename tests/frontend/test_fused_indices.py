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


def sum_of_squares(dk, dv):
    """TileLang's gated-delta-rule backward: a flat fragment whose shape is one extent
    (``(dv * dk)``, no tuple) written at ``i`` from shared memory read at ``i // dv, i % dv``."""
    @T.prim_func
    def main(A: T.Tensor((dk, dv), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((dk, dv), "float32")
            F = T.alloc_fragment((dv * dk), "float32")
            S = T.alloc_fragment((1,), "float32")
            T.copy(A, A_s)
            T.clear(S)
            for i in T.Parallel(dk * dv):
                F[i] = A_s[i // dv, i % dv] * A_s[i // dv, i % dv]
            T.reduce_sum(F, S, dim=-1, clear=False)
            B[0] = S[0]
    return main


def test_a_flat_fragment_of_one_extent(ptxas):
    a = torch.randn(64, 32, dtype=torch.float32)
    kernel = tilelang.compile(sum_of_squares(64, 32), out_idx=[1])
    torch.testing.assert_close(kernel(a), (a.double() ** 2).sum().float().reshape(1))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_gpu_flat_fragment_of_one_extent():
    a = torch.randn(64, 32)
    kernel = tilelang.compile(sum_of_squares(64, 32), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(kernel(a.cuda()).cpu().double(),
                               (a.double() ** 2).sum().reshape(1), rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("bm, bn", [(32, 32), (16, 64)])
def test_gpu_matches_the_simulator(bm, bn):
    a = torch.randn(bm, bn)
    kernel = tilelang.compile(flatten(bm, bn), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))

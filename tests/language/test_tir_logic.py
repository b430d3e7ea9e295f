"""TIR's ``T.And``/``T.Or``/``T.Not`` (TileOPs' softmax and cumulative kernels) are
``and``/``or``/``not``, and ``T.func_attr({...})`` at a kernel's top (older TileLang
programs) is dropped: in simulation, in PTX through ptxas, and on the GPU against torch."""
import pytest
import torch

import tilejit
import tilejit.language as T


def masked_copy(M, N, bm=32, bn=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                r, c = by * bm + i, bx * bn + j
                if T.And(r < M, c < N):
                    B[r, c] = T.if_then_else(T.Or(T.Not(A[r, c] > 0), r == 0), 0.0, A[r, c])
    return main


def _expected(a):
    return torch.where((a <= 0) | (torch.arange(a.shape[0])[:, None] == 0), 0.0, a)


def test_tir_logic_and_func_attr(ptxas):
    a = torch.randn(50, 40)
    assert torch.equal(tilejit.compile(masked_copy(50, 40), out_idx=[1])(a), _expected(a))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(masked_copy(50, 40), out_idx=[1], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)
    assert bool(T.And(True, T.Not(False))) and not bool(T.Or(False, False))   # on the host
    with pytest.raises(TypeError, match=r"T.func_attr\(attrs\): expected a dict"):
        T.func_attr("tir.noalias")


@pytest.mark.gpu
def test_tir_logic_and_func_attr_on_the_gpu():
    a = torch.randn(300, 200)
    b = tilejit.compile(masked_copy(300, 200), out_idx=[1])(a.cuda())
    assert torch.equal(b.cpu(), _expected(a))

"""TVM's script branches (TileOPs' tiled softmax and cumulative kernels):
``with T.If(c):`` holding ``with T.Then():`` and ``with T.Else():`` is Python's
``if``/``else`` (``frontend/tir_branches.py``), also ``with T.If(c), T.Then():``; in
simulation, in PTX through ptxas, and on the GPU against torch; other arrangements are
errors at their line."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def tiled_rows(M, N, tile=64, bm=4):
    """A row sum over column tiles, the last tile guarded (TileOPs' padded tiles)."""
    tiles = (N + tile - 1) // tile

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"),
             F: T.Tensor((M,), "float32")):
        with T.Kernel(M // bm, threads=128) as bx:
            acc = T.alloc_fragment((bm, tile), "float32")
            row = T.alloc_fragment((bm,), "float32")
            T.clear(acc)
            for t in T.serial(tiles):
                with T.If(t < tiles - 1):
                    with T.Then():
                        for i, j in T.Parallel(bm, tile):
                            acc[i, j] += X[bx * bm + i, t * tile + j]
                    with T.Else():
                        for i, j in T.Parallel(bm, tile):
                            acc[i, j] += T.if_then_else(t * tile + j < N,
                                                        X[bx * bm + i, t * tile + j], 0.0)
            T.reduce_sum(acc, row, dim=1)
            for i in T.Parallel(bm):
                S[bx * bm + i] = row[i]
            for i in T.Parallel(bm):
                with T.If(bx == 0), T.Then():
                    F[bx * bm + i] = 1.0
    return main


def _check(x, s, f):
    torch.testing.assert_close(s.double(), x.double().sum(1), rtol=1e-5, atol=1e-4)
    assert torch.equal(f[:4], torch.ones(4))


def test_tvm_script_branches_are_an_if(ptxas):
    x = torch.randn(8, 150)
    s, f = torch.zeros(8), torch.zeros(8)
    tilejit.compile(tiled_rows(8, 150))(x, s, f)
    _check(x, s, f)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(tiled_rows(8, 150), target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


def test_an_else_without_its_if_is_an_error():
    @T.prim_func
    def stray(X: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            with T.Else():
                X[0] = 1.0
    with pytest.raises(CompileError, match=r"T.Then\(\) / T.Else\(\) belong inside "
                                           r"`with T.If\(cond\):`"):
        tilejit.compile(stray, target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_tvm_script_branches_on_the_gpu():
    x = torch.randn(64, 300)
    s, f = torch.zeros(64, device="cuda"), torch.zeros(64, device="cuda")
    tilejit.compile(tiled_rows(64, 300))(x.cuda(), s, f)
    _check(x, s.cpu(), f.cpu())

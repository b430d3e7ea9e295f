"""``T.transpose(src, dst)``: dst[j, i] = src[i, j] of two whole 2-d tiles, as TileLang's
shared-memory transpose test writes it (passes/transposes.py; fragments through
fragment_transposes.py)."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def transposed_copy(M, N, block_M, block_N, dtype="float16", through="shared"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), dtype)
            if through == "shared":
                tile_T = T.alloc_shared((block_N, block_M), dtype)
            else:
                tile_T = T.alloc_fragment((block_N, block_M), "float32")
            T.copy(A[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], tile)
            T.transpose(tile, tile_T)
            T.copy(tile_T, B[bx * block_N:(bx + 1) * block_N, by * block_M:(by + 1) * block_M])
    return main


CASES = [(128, 128, 128, 128, "float16", "shared"), (256, 128, 64, 32, "float16", "shared"),
         (64, 96, 32, 64, "float32", "shared"), (128, 64, 64, 32, "float16", "fragment")]
IDS = ["single-tile", "tiles", "float32", "into-a-fragment"]


@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_simulator(M, N, bm, bn, dtype, through):
    a = torch.randn(M, N).to(getattr(torch, dtype))
    b = tilelang.compile(transposed_copy(M, N, bm, bn, dtype, through), out_idx=[1],
                         target="sim")(a)
    assert torch.equal(b, a.T)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_ptx_assembles(M, N, bm, bn, dtype, through, arch, ptxas):
    kernel = tilelang.compile(transposed_copy(M, N, bm, bn, dtype, through), out_idx=[1])
    ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_shapes_that_do_not_transpose_are_an_error_on_both_targets():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float32")
            S2 = T.alloc_shared((64, 32), "float32")
            T.copy(A, S)
            T.transpose(S, S2)
            T.copy(S2, B)
    with pytest.raises(CompileError, match=r"T.transpose: src 'S' \(64, 32\) and dst 'S2'"):
        tilelang.compile(main, out_idx=[1]).get_kernel_source(arch="sm_90a")
    with pytest.raises((CompileError, ValueError), match="T.transpose"):
        tilelang.compile(main, out_idx=[1], target="sim")(torch.zeros(64, 32))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_gpu_matches_simulator_and_torch(M, N, bm, bn, dtype, through):
    a = torch.randn(M, N).to(getattr(torch, dtype))
    program = transposed_copy(M, N, bm, bn, dtype, through)
    b = tilelang.compile(program, out_idx=[1])(a.cuda())
    b_sim = tilelang.compile(program, out_idx=[1], target="sim")(a)
    assert torch.equal(b.cpu(), b_sim) and torch.equal(b_sim, a.T)
    np.testing.assert_array_equal(b.cpu().float().numpy(), a.T.float().numpy())

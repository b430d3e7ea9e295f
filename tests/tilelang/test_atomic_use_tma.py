"""``T.atomic_add(region, shared_tile, use_tma=True)``, as TileLang's GQA backward with
TMA reductions writes it: the hint chooses how the region is added, not the sums."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def accumulate(M, N, use_tma=True):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 32), 2, threads=128) as (bx, _by):
            s = T.alloc_shared((32, N), "float32")
            T.copy(X[bx * 32:(bx + 1) * 32, :], s)
            T.atomic_add(Y[bx * 32:(bx + 1) * 32, :], s, memory_order="relaxed",
                         use_tma=use_tma)
    return main


def test_the_sums_in_simulation():
    x = torch.randn(64, 32)
    y = torch.ones(64, 32)
    tilelang.compile(accumulate(64, 32), target="sim")(x, y)
    torch.testing.assert_close(y, 1 + 2 * x)


def test_use_tma_must_be_a_bool():
    with pytest.raises(CompileError, match="use_tma must be True or False"):
        tilelang.compile(accumulate(64, 32, use_tma="yes")).get_kernel_source(arch="sm_90a")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(accumulate(64, 32)).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    x = torch.randn(96, 32)
    y = torch.ones(96, 32)
    yg = y.cuda()
    tilelang.compile(accumulate(96, 32))(x.cuda(), yg)
    tilelang.compile(accumulate(96, 32), target="sim")(x, y)
    torch.testing.assert_close(yg.cpu().double(), 1 + 2 * x.double())
    torch.testing.assert_close(yg.cpu(), y)

"""``T.copy(src, dst=X)`` and ``T.copy(src=X, dst=Y)``, as TileLang's attention-sink
backward writes ``T.copy(dO[...], dst=do)``: the operands by keyword mean what they mean
by position (frontend/rewrite.py)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def by_keyword():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32:(bx + 1) * 32, :], dst=S)
            T.copy(src=S, dst=B[bx * 32:(bx + 1) * 32, :])
    return main


def test_in_simulation():
    a, b = torch.randn(64, 64), torch.zeros(64, 64)
    tilelang.compile(by_keyword(), target="sim")(a, b)
    assert torch.equal(a, b)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(by_keyword()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu():
    a, b = torch.randn(64, 64), torch.zeros(64, 64, device="cuda")
    tilelang.compile(by_keyword())(a.cuda(), b)
    assert torch.equal(b.cpu(), a)

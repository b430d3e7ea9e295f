"""``T.clear(v)`` and ``T.fill(v, x)`` of a ``T.alloc_var`` scalar, as TileLang's GDN
backward clears ``dg_last_local_0``: the variable set to 0 / x in its dtype
(frontend/rewrite.py)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def clear_and_fill():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var(dtype="float32")
            w = T.alloc_var("float16")
            T.fill(v, 3.0)
            T.clear(w)
            for i in T.serial(8):
                v = v + A[i]
            w = w + 1.5
            B[0] = v
            B[1] = w
    return main


def test_in_simulation():
    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(2)
    tilelang.compile(clear_and_fill(), target="sim")(a, b)
    assert b.tolist() == [31.0, 1.5]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(clear_and_fill()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu():
    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(2, device="cuda")
    tilelang.compile(clear_and_fill())(a.cuda(), b)
    assert b.cpu().tolist() == [31.0, 1.5]

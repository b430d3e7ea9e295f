"""TVM's ``T.truncdiv`` / ``T.truncmod`` (C's integer ``/`` and ``%``: toward zero, the
remainder with the dividend's sign), which a DeepSeek-derived MoE index kernel uses:
in a kernel the front end writes them with Python's ``//`` and ``%`` and one step toward
zero (``frontend/rewrite._truncated``), in the operands' type."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.language import truncdiv, truncmod

torch = pytest.importorskip("torch")


def program(dtype):
    @T.prim_func
    def main(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype),
             Q: T.Tensor((256,), dtype), R: T.Tensor((256,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Q[bx * 128 + i] = T.truncdiv(A[bx * 128 + i], B[bx * 128 + i])
                R[bx * 128 + i] = truncmod(A[bx * 128 + i], B[bx * 128 + i])
    return main


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-1000, 1000, (256,), generator=g).to(dtype)
    b = torch.randint(1, 13, (256,), generator=g).to(dtype)
    b = torch.where(torch.rand(256, generator=g) < 0.5, -b, b)
    a[:4] = torch.tensor([-7, 7, -8, 0], dtype=dtype)
    b[:4] = torch.tensor([2, -2, 4, -3], dtype=dtype)
    return a, b


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_in_the_simulator_against_torch(dtype):
    a, b = _inputs(dtype)
    q, r = torch.zeros_like(a), torch.zeros_like(a)
    tilejit.compile(program(str(dtype).split(".")[1]))(a, b, q, r)
    assert torch.equal(q, torch.div(a, b, rounding_mode="trunc"))
    assert torch.equal(r, torch.fmod(a, b))
    assert q[:4].tolist() == [-3, -3, -2, 0] and r[:4].tolist() == [-1, 1, 0, 0]


def test_on_host_values():
    assert (truncdiv(-7, 2), truncmod(-7, 2), truncdiv(7, -2), truncmod(7, -2)) == \
        (-3, -1, -3, 1)
    x = np.array([-7, 7, 6], np.int32)
    assert truncdiv(x, np.int32(2)).tolist() == [-3, 3, 3]
    assert truncdiv(x, np.int32(2)).dtype == np.int32


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = tilejit.compile(program("int32"), target=f"cuda -arch={arch}").get_kernel_source()
    assert any(op in ptx for op in ("div.s", "rem.s", "div.u", "rem.u"))
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_on_the_gpu_against_torch_and_the_simulator(dtype):
    a, b = _inputs(dtype, 1)
    kernel = tilejit.compile(program(str(dtype).split(".")[1]))
    q, r = torch.zeros_like(a).cuda(), torch.zeros_like(a).cuda()
    kernel(a.cuda(), b.cuda(), q, r)
    assert torch.equal(q.cpu(), torch.div(a, b, rounding_mode="trunc"))
    assert torch.equal(r.cpu(), torch.fmod(a, b))

"""A slice of one element in a ``T.copy`` region whose extent comes from the other
operand (``T.copy(f, B[0:1, :])`` with a (64,) fragment, ``T.copy(A[3:4, :], f)``) names
the point it covers, as an index does (``B[0, :]``): it was "the region has 2 sliced
dimension(s), the other operand's shape is (64,)". In simulation, PTX (sm_80, sm_90a)
and, in the GPU twin, against the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T


def _kernel():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32),
             C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64,), T.float32)
            s = T.alloc_shared((64,), T.float32)
            T.copy(A[3:4, :], f)
            T.copy(f, B[0:1, :])
            T.copy(A[:, 5:6], s)
            T.copy(s, C[:, 1:2])
    return main


def _run(device="cpu"):
    torch.manual_seed(0)
    a = torch.randn(64, 64).to(device)      # the same numbers on either device
    b = torch.zeros(64, 64, device=device)
    c = torch.zeros(64, 64, device=device)
    tilejit.compile(_kernel())(a, b, c)
    return a, b, c


def test_a_unit_slice_is_the_point_it_names():
    a, b, c = _run()
    assert torch.equal(b[0], a[3]) and torch.equal(c[:, 1], a[:, 5])
    assert not b[1:].any() and not c[:, 2:].any()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_it_assembles(ptxas, arch):
    ptxas(tilejit.compile(_kernel(), target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu():
    _, b, c = _run("cuda")
    _, b_sim, c_sim = _run()
    assert torch.equal(b.cpu(), b_sim) and torch.equal(c.cpu(), c_sim)

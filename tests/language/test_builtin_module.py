"""``T.builtin.<name>``: TileLang's ``tilelang.language.builtin`` module, an attribute of
its language package (programs write ``T.builtin.sync_threads()``), is the language's
own names; one tilejit does not have is refused by name."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.language.compat import NotSupportedError


def reversed_through_shared(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            S = T.alloc_shared((n,), "float32")
            tx = T.builtin.get_lane_idx() + T.builtin.get_warp_idx() * 32
            S[tx] = A[tx]
            T.builtin.sync_threads()
            B[tx] = S[n - 1 - tx]
    return main


def test_builtin_names_are_the_languages():
    assert T.builtin.sync_threads is T.sync_threads and T.builtin.shfl_xor is T.shfl_xor
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    tilejit.compile(reversed_through_shared(64), target="sim")(a, b)
    np.testing.assert_array_equal(b, a[::-1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_its_ptx_has_the_barrier(arch, ptxas):
    ptx = tilejit.compile(reversed_through_shared(64), target=f"cuda -arch={arch}")\
        .get_kernel_source()
    assert "bar.sync" in ptx or "barrier.sync" in ptx
    ptxas(ptx, arch)


def test_a_builtin_tilejit_lacks_is_named():
    with pytest.raises(NotSupportedError, match=r"tma_load"):
        T.builtin.tma_load  # noqa: B018 (reading it raises)
    with pytest.raises(AttributeError, match=r"tilelang.language.builtin.*sync_thread"):
        T.builtin.sync_thread  # noqa: B018


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.randn(128)
    b = torch.zeros(128, device="cuda")
    tilejit.compile(reversed_through_shared(128))(a.cuda(), b)
    sim = torch.zeros(128)
    tilejit.compile(reversed_through_shared(128), target="sim")(a, sim)
    assert torch.equal(b.cpu(), a.flip(0)) and torch.equal(sim, a.flip(0))

"""A view written inside a tile operation's call, ``T.cumsum(T.view(S, (1, n)), dim=1)``
(TileLang's issue 1001): named before the call by the front end (frontend/rewrite.py),
as the tile passes and the simulator take views."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def cumsum_of_a_view(hidden):
    num_tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(x: T.Tensor[(num_tokens, hidden), T.float32],
             y: T.Tensor[(num_tokens, hidden), T.float32]):
        with T.Kernel(num_tokens, threads=128) as pid:
            smem = T.alloc_shared((hidden,), T.float32)
            T.copy(x[pid, :], smem)
            T.cumsum(T.view(smem, (1, hidden)), dim=1)
            T.copy(smem, y[pid, :])
    return main


def test_simulator():
    x = torch.randn(3, 128)
    y = torch.zeros(3, 128)
    tilelang.compile(cumsum_of_a_view(128), target="sim")(x, y)
    np.testing.assert_allclose(y.numpy(), np.cumsum(x.numpy().astype(np.float64), axis=1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    x = torch.zeros(3, 128)
    ptxas(tilelang.compile(cumsum_of_a_view(128)).get_kernel_source(arch=arch,
                                                                   tensors=[x, x]), arch)


@pytest.mark.gpu
def test_gpu_matches_the_simulator():
    x = torch.randn(5, 128)
    y_sim = torch.zeros(5, 128)
    kernel = cumsum_of_a_view(128)
    tilelang.compile(kernel, target="sim")(x, y_sim)
    y = torch.zeros(5, 128, device="cuda")
    tilelang.compile(kernel)(x.cuda(), y)
    torch.testing.assert_close(y.cpu(), y_sim, rtol=1e-5, atol=1e-5)

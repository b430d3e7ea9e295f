"""Kernels whose only tensors are their T.empty outputs (a fill, an iota; TileLang's
``kernel()`` with ``out_idx``): on a machine with a CUDA device they run there and return
torch CUDA tensors; in the simulator they return torch tensors when torch is imported,
as TileLang's kernels return torch tensors: CPU ones, or on a machine with a device,
simulated on host copies and put where the GPU's launch would put them."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def iota(n: T.constexpr = 64):
    Y = T.empty((n,), T.int32)
    with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                Y[bx * 64 + i] = bx * 64 + i
    return Y


@tilejit.jit(out_idx=-1)
def fill_inf(dtype):
    @T.prim_func
    def main(A: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, T.infinity(dtype))
    return main


iota_sim = tilejit.kernel(iota.func, target="sim")


def test_the_simulator_returns_torch_tensors_when_torch_is_there():
    y = iota_sim(n=100)
    assert isinstance(y, torch.Tensor)
    assert y.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(100, dtype=np.int32))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_tilelang_kernel_without_inputs(dtype, monkeypatch):
    monkeypatch.setenv("TILEJIT_TARGET", "sim")
    out = fill_inf(dtype)()
    assert isinstance(out, torch.Tensor) and str(out.dtype) == f"torch.{dtype}"
    assert torch.all(out == torch.inf)


@pytest.mark.gpu
def test_outputs_only_run_on_the_gpu():
    y = iota(n=1000)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    torch.testing.assert_close(y.cpu(), torch.arange(1000, dtype=torch.int32))
    simulated = iota_sim(n=1000)
    assert simulated.is_cuda
    torch.testing.assert_close(y, simulated)
    out = fill_inf("float16")()
    assert out.is_cuda and torch.all(out == torch.inf)

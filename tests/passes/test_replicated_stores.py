"""A T.Parallel over a layout several threads hold copies of (a reduction's result, held
by every thread that held its row): every copy runs each iteration, and a store to a
tensor or a shared tile is made by one copy only. `Y[i] = Y[i] + r[i]` by 64 copies could
add r twice on the GPU (one copy loading after another stored), where the simulator adds
it once (found by a user-style fuzz). Device program and PTX here, GPU twin there."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def accumulate_row_sums(X, Y):
    M, N = X.shape
    with T.Kernel(1, threads=64):
        x = T.alloc_fragment((M, N), T.float32)
        r = T.alloc_fragment((M,), T.float32)
        T.copy(X, x)
        T.reduce_sum(x, r, dim=1)
        for i in T.Parallel(M):
            Y[i] = Y[i] + r[i]


def _inputs(seed=0):
    x = np.random.default_rng(seed).random((2, 576)).astype(np.float32)
    return x, np.ones(2, np.float32)


def test_in_simulation():
    x, y = _inputs()
    accumulate_row_sums(x, y)
    np.testing.assert_allclose(y, x.astype(np.float64).sum(1) + 1, rtol=1e-5)


def test_one_copy_stores(tmp_path, monkeypatch, ptxas):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    x, y = _inputs()
    ptx = accumulate_row_sums.compile(x, y, target="cuda", arch="sm_90a").ptx
    (text,) = tmp_path.glob("*/*_after_infer_layouts.py")
    assert "if __tj_frag_writer('L0'):\n            Y[i] = Y[i]" in text.read_text()
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    x, y = _inputs(1)
    for _ in range(20):
        dev = torch.ones(2, device="cuda")
        accumulate_row_sums(torch.from_numpy(x).cuda(), dev)
        np.testing.assert_allclose(dev.cpu().numpy(), x.astype(np.float64).sum(1) + 1,
                                   rtol=1e-5)

"""A T.Parallel that reads a small fragment at an index naming none of the loop's own
indices (``row_max[i]`` in a loop over j, i a serial loop's variable), where T.Parallel
loops over the fragment's own shape write it (TileOPs' softmax family): every thread
holds the whole fragment and runs each iteration of those loops on its own copy, stores
to memory made by one copy (passes/layout_inference.py, ``_Collect.broadcast``)."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError

torch = pytest.importorskip("torch")

BM, N, TN = 2, 384, 128


@tilelang.jit
def online_log_softmax(x):
    """log_softmax of each row, N in tiles of TN with the online max/sum recurrence; the
    per-row values are fragments of (BM,) written by T.Parallel(BM) loops and read at
    the serial row index inside loops over a tile's columns."""
    x: T.Tensor((8, N), T.float32)
    y = T.empty((8, N), T.float32)
    with T.Kernel(8 // BM, threads=128) as pid:
        tile = T.alloc_fragment((BM, TN), T.float32)
        row_max = T.alloc_fragment((BM,), T.float32)
        prev_max = T.alloc_fragment((BM,), T.float32)
        tile_max = T.alloc_fragment((BM,), T.float32)
        tile_sum = T.alloc_fragment((BM,), T.float32)
        row_sum = T.alloc_fragment((BM,), T.float32)
        log_sum = T.alloc_fragment((BM,), T.float32)
        T.fill(row_max, -T.infinity(T.float32))
        T.fill(row_sum, 0.0)
        for t in T.serial(N // TN):
            for i in T.serial(BM):
                for j in T.Parallel(TN):
                    tile[i, j] = x[pid * BM + i, t * TN + j]
            T.reduce_max(tile, tile_max, dim=1)
            for i in T.Parallel(BM):
                prev_max[i] = row_max[i]
                row_max[i] = T.max(row_max[i], tile_max[i])
            for i in T.serial(BM):
                for j in T.Parallel(TN):
                    tile[i, j] = T.exp(tile[i, j] - row_max[i])
            T.reduce_sum(tile, tile_sum, dim=1)
            for i in T.Parallel(BM):
                row_sum[i] = row_sum[i] * T.exp(prev_max[i] - row_max[i]) + tile_sum[i]
        for i in T.Parallel(BM):
            log_sum[i] = T.log(row_sum[i]) + row_max[i]
        for t in T.serial(N // TN):
            for i in T.serial(BM):
                for j in T.Parallel(TN):
                    y[pid * BM + i, t * TN + j] = x[pid * BM + i, t * TN + j] - log_sum[i]
    return y


@tilelang.jit
def scaled_rows(x, scale, count):
    """A (4,) fragment written from a tensor in T.Parallel(4), stored and counted in that
    loop (each copy runs it: one store and one atomic per element), and read at a serial
    loop's index in a loop over the columns."""
    x: T.Tensor((4, 256), T.float32)
    scale: T.Tensor((4,), T.float32)
    count: T.Tensor((1,), T.int32)
    y = T.empty((4, 256), T.float32)
    seen = T.empty((4,), T.float32)
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_fragment((4,), T.float32)
        for i in T.Parallel(4):
            s[i] = scale[i] * 2.0
            seen[i] = s[i]
            T.atomic_add(count[0], 1)
        for k in T.serial(4):
            for j in T.Parallel(256):
                y[k, j] = x[k, j] * s[k]
    return y, seen


@tilelang.jit
def reads_a_wide_fragment(x):
    """A fragment of 512 written by a T.Parallel over it (spread over the threads) and
    read at a serial loop's index: no thread holds it whole."""
    x: T.Tensor((512,), T.float32)
    y = T.empty((4, 128), T.float32)
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_fragment((512,), T.float32)
        for i in T.Parallel(512):
            s[i] = x[i] * 2.0
        for k in T.serial(4):
            for j in T.Parallel(128):
                y[k, j] = s[k]
    return y


def _rows(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(8, N, generator=g) * 4


def _scaled_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 256, generator=g), torch.randn(4, generator=g)


def test_the_online_log_softmax_matches_torch():
    x = _rows()
    y = online_log_softmax(x)
    torch.testing.assert_close(y.double(), torch.log_softmax(x.double(), 1),
                               rtol=1e-5, atol=1e-5)


def test_each_copy_runs_the_writing_loop_and_one_copy_stores():
    x, scale = _scaled_inputs()
    count = torch.zeros(1, dtype=torch.int32)
    y, seen = scaled_rows(x, scale, count)
    torch.testing.assert_close(y, x * (scale * 2)[:, None])
    torch.testing.assert_close(seen, scale * 2)
    assert count.item() == 4


def test_a_fragment_spread_over_the_threads_is_an_error():
    with pytest.raises(CompileError, match=r"`s\[k\]` reads fragment 's' \(shape \(512,\)\) "
                       r"at an index that is none of the T.Parallel's own \(j\)"):
        reads_a_wide_fragment(torch.zeros(512))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    x = _rows().numpy()
    ptx = online_log_softmax.compile(x, target="cuda", arch=arch).get_kernel_source()
    assert "shfl.sync.bfly" in ptx and "ex2.approx" in ptx
    ptxas(ptx, arch)
    x, scale = (t.numpy() for t in _scaled_inputs())
    ptx = scaled_rows.compile(x, scale, np.zeros(1, np.int32), target="cuda",
                              arch=arch).get_kernel_source()
    assert "atom.global.add" in ptx or "red.global.add" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_broadcast_reads_on_the_gpu_against_torch_and_the_simulator():
    x = _rows(1)
    y = online_log_softmax(x.cuda()).cpu()
    torch.testing.assert_close(y.double(), torch.log_softmax(x.double(), 1),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, online_log_softmax(x), rtol=1e-6, atol=1e-6)
    x, scale = _scaled_inputs(1)
    count, count_sim = torch.zeros(1, dtype=torch.int32, device="cuda"), torch.zeros(
        1, dtype=torch.int32)
    y, seen = scaled_rows(x.cuda(), scale.cuda(), count)
    y_sim, seen_sim = scaled_rows(x, scale, count_sim)
    torch.testing.assert_close(y.cpu(), x * (scale * 2)[:, None])
    assert torch.equal(y.cpu(), y_sim) and torch.equal(seen.cpu(), seen_sim)
    assert count.item() == count_sim.item() == 4
    assert np.array_equal(seen.cpu().numpy(), (scale * 2).numpy())

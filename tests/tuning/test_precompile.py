"""Autotuning's parallel compile (tuning/precompile.py): configs compiled in forked worker
processes land in the disk cache under the keys the tuning process looks up; and, with
``-m gpu``, a tuning run on the device compiles its configs that way."""
import logging
import time

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.tuning.precompile import default_workers, precompile
from kernels import gemm

CONFIGS = [dict(block_M=bm, block_N=bn, block_K=32, stages=s)
           for bm, bn, s in [(64, 64, 2), (128, 64, 2), (64, 128, 3), (128, 128, 3)]]


def _specs(kernel, arrays, configs):
    return [kernel._prepare(tuple(kernel._bind(arrays, dict(c))), target="cuda",
                            arch="sm_90a")[3] for c in configs]


def test_workers_compile_into_the_disk_cache_the_parent_reads(caplog):
    a = np.zeros((256, 256), np.float16)
    arrays = (a, a.copy(), np.zeros((256, 256), np.float32))
    kernel = tilejit.kernel(gemm.func)
    report = precompile(kernel, _specs(kernel, arrays, CONFIGS), workers=2)
    assert report is not None and report["workers"] == 2 and report["errors"] == []
    fresh = tilejit.kernel(gemm.func)           # nothing in memory: the disk is read
    with caplog.at_level(logging.DEBUG, logger="tilejit"):
        start = time.perf_counter()
        for c in CONFIGS:
            fresh.compile(*arrays, target="cuda", arch="sm_90a", **c)
        seconds = time.perf_counter() - start
    hits = [r for r in caplog.records if "disk cache hit" in r.getMessage()]
    assert len(hits) == len(CONFIGS), [r.getMessage() for r in caplog.records]
    assert seconds < 0.5 * len(CONFIGS)


def test_a_config_that_fails_in_a_worker_is_reported_not_raised():
    a = np.zeros((256, 256), np.float16)
    arrays = (a, a.copy(), np.zeros((256, 256), np.float32))
    kernel = tilejit.kernel(gemm.func)
    # 256 x 64 and 64 x 512 float16 tiles in 4 stages: 384 KiB of shared memory
    configs = [CONFIGS[0], dict(block_M=256, block_N=512, block_K=64, stages=4)]
    report = precompile(kernel, _specs(kernel, arrays, configs), workers=2)
    assert len(report["errors"]) == 1 and "bytes of shared memory" in report["errors"][0]


def test_nothing_runs_without_the_disk_cache_or_with_one_worker(monkeypatch):
    a = np.zeros((128, 128), np.float16)
    arrays = (a, a.copy(), np.zeros((128, 128), np.float32))
    kernel = tilejit.kernel(gemm.func)
    specs = _specs(kernel, arrays, CONFIGS[:2])
    assert precompile(kernel, specs, workers=1) is None
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    assert precompile(kernel, specs, workers=4) is None
    assert default_workers() >= 1


def test_compile_workers_is_checked():
    with pytest.raises(ValueError, match="compile_workers"):
        tilejit.autotune(CONFIGS, compile_workers=0)
    with pytest.raises(ValueError, match="compile_workers"):
        tilejit.autotune(CONFIGS, compile_workers=2.5)


@tilejit.kernel
def scale_rows(X, Y, block: T.constexpr = 64, threads: T.constexpr = 128):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block), threads=threads) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                Y[bx * block + i, j] = X[bx * block + i, j] * 2.0


@pytest.mark.gpu
def test_a_gpu_tuning_run_compiles_its_configs_in_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))      # every config cold
    configs = [dict(block=b, threads=t) for b in (16, 32, 64) for t in (128, 256)]
    tuned = tilejit.autotune(configs, warmup=1, rep=3, compile_workers=3)(
        tilejit.kernel(scale_rows.func))
    x = torch.randn(1000, 256, device="cuda")
    y = torch.empty_like(x)
    tuned(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)
    assert tuned.precompiled["workers"] == 3 and tuned.precompiled["errors"] == []
    assert all(ms is not None for _, ms, _ in tuned.timings)

"""TileLang's ``early_stop`` of the autotuner: a config whose first run is slower than
``early_stop_factor`` × the best time so far is not timed in full (its first run is its
time); the factor must be at least 1. The timing here on the CPU; the GPU twin tunes a
classic factory with it on the device."""
import time

import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.tilelang.autotuner_class import ProfileArgs
from tilejit.tuning.autotune import timed


def test_a_config_past_the_threshold_is_timed_once():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.003)
    ms, why = timed(slow, 5, 10, False, None, stop_ms=1.0)
    assert why is None and ms >= 3 and len(calls) == 1
    calls.clear()
    ms, _ = timed(slow, 2, 3, False, None, stop_ms=100.0)
    assert len(calls) == 1 + 2 + 3 and ms >= 3


def test_the_threshold_is_the_factor_times_the_best_so_far():
    assert ProfileArgs(early_stop=True, early_stop_factor=1.5).stop_ms([None, 4.0, 2.0]) == 3.0
    assert ProfileArgs(early_stop=True).stop_ms([None]) is None
    assert ProfileArgs().stop_ms([1.0]) is None
    with pytest.raises(ValueError, match=r"early_stop_factor must be >= 1.0, got 0.5"):
        ProfileArgs(early_stop=True, early_stop_factor=0.5)


def _factory():
    @tilelang.jit(out_idx=[-1])
    def scale(N=1024, block=128, threads=128):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
                for i in T.Parallel(block):
                    B[bx * block + i] = A[bx * block + i] * 2.0
        return main
    return scale


def test_the_decorator_takes_early_stop():
    tuned = tilelang.autotune(configs=[{"block": 128}, {"block": 256}], early_stop=True,
                              early_stop_factor=1.2)(_factory())
    kernel = tuned()
    assert kernel.config["block"] == 128       # simulation: the first config that compiles
    with pytest.raises(ValueError, match="early_stop_factor must be >= 1.0"):
        tilelang.autotune(configs=[{"block": 128}], early_stop=True,
                          early_stop_factor=0.9)(_factory())()


@pytest.mark.gpu
def test_early_stop_on_the_gpu():
    import torch
    tuned = tilelang.autotune(configs=[{"block": 128}, {"block": 256}, {"block": 512,
                                                                          "threads": 512}],
                              early_stop=True, early_stop_factor=2.0)(_factory())
    kernel = tuned(N=1 << 20)
    a = torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(kernel(a), a * 2.0)
    assert kernel.latency > 0

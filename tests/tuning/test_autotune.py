"""@tilejit.autotune and tilejit.testing.do_bench, in the simulator (one GPU test)."""
import sys
import time

import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.tuning.autotune import Autotuner, AutotuneWarning, autotune
from tilejit.testing import do_bench

BLOCKS = [{"block": 32}, {"block": 64}, {"block": 128}, {"block": 256}]


@tilejit.kernel
def add(A, B, C, block: T.constexpr = 128, threads: T.constexpr = 128,
        scale: T.constexpr = 1):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = A[idx] * scale + B[idx]


@tilejit.kernel
def accumulate(A, C, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = C[idx] + A[idx]


@tilejit.kernel
def axpy(A, B, C, alpha, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = A[idx] * alpha + B[idx]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)
    return tmp_path


class Counting:
    """A kernel stand-in that counts launches."""

    def __init__(self, kernel):
        self.kernel, self.source, self.__name__ = kernel, kernel.source, kernel.__name__
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.kernel(*args, **kwargs)


def arrays(n=300, dtype=np.float32):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    return a, b, np.zeros_like(a)


def test_tunes_four_configs_and_computes(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)   # progress as one stderr line a config
    tuned = autotune(configs=BLOCKS, warmup=1, rep=2)(add)
    a, b, c = arrays()
    tuned(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert tuned.best_config in BLOCKS and tuned.kernel is add
    assert [cfg for cfg, _, _ in tuned.timings] == BLOCKS
    assert all(ms is not None and ms > 0 and note == "ok" for _, ms, note in tuned.timings)
    assert tuned.best_config == min(tuned.timings, key=lambda t: t[1])[0]
    assert capsys.readouterr().err.count("tilejit.autotune add") == 4   # progress lines
    c[:] = 0
    tuned(a, b, c)   # from memory: no tuning
    np.testing.assert_array_equal(c, a + b)
    assert capsys.readouterr().err == ""
    a2, b2, c2 = arrays(n=70)
    tuned(a2, b2, c2)   # another shape: tuned again
    np.testing.assert_array_equal(c2, a2 + b2)
    assert capsys.readouterr().err.count("tilejit.autotune add") == 4


def test_unknown_and_malformed_configs():
    with pytest.raises(ValueError, match=r"\{'blok': 64\}: 'blok' is not a constexpr .*"
                                        r"parameters: block, threads, scale"):
        autotune(configs=[{"block": 32}, {"blok": 64}])(add)
    with pytest.raises(ValueError, match="non-empty list"):
        autotune(configs=[])(add)
    with pytest.raises(ValueError, match="dict"):
        autotune(configs=[("block", 32)])(add)
    with pytest.raises(ValueError, match="'M' is not a parameter"):
        autotune(configs=BLOCKS, key=["M"])(add)
    with pytest.raises(TypeError, match="above @tilejit.kernel"):
        autotune(configs=BLOCKS)(lambda x: x)


def test_a_tuned_constexpr_given_explicitly_is_used_untuned():
    # TileLang's rule: explicit values skip the tuning (the kernel's defaults for the rest)
    tuned = autotune(configs=BLOCKS)(add)
    a, b, c = arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned(a, b, c, block=64)
        np.testing.assert_array_equal(c, a + b)
        c[:] = 0
        tuned(a, b, c, 64)
        np.testing.assert_array_equal(c, a + b)
    assert tuned.timings == [] and tuned.best_config is None
    handle = tuned.compile(a, b, c, block=64, target="cuda", arch="sm_80")
    assert handle.ptx


class SlowFor(Counting):
    """The kernel, slowed down by ``delay`` seconds a call for the configs given."""

    def __init__(self, kernel, slow_blocks, delay):
        super().__init__(kernel)
        self.slow_blocks, self.delay = slow_blocks, delay

    def __call__(self, *args, **kwargs):
        block = kwargs.get("block", args[3] if len(args) > 3 else 128)
        if block in self.slow_blocks:
            time.sleep(self.delay)
        return super().__call__(*args, **kwargs)


def test_timeout_skips_a_config_whose_timing_takes_too_long():
    # TileLang's timeout=: seconds one config's timing may take
    tuned = autotune(configs=BLOCKS[:2], warmup=1, rep=20, timeout=0.5)(
        SlowFor(add, {32}, 0.05))
    a, b, c = arrays()
    with pytest.warns(AutotuneWarning, match=r"'block': 32.*skipped: timed out: its 21 timed "
                                             r"runs would take about .* more than "
                                             r"timeout=0.5 s"):
        tuned(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert tuned.best_config == {"block": 64}
    assert tuned.timings[0][1] is None and tuned.timings[1][2] == "ok"


def test_timeout_values():
    for no_limit in (None, 0, -1):
        assert autotune(configs=BLOCKS, timeout=no_limit)(add).timeout is None
    assert autotune(configs=BLOCKS, timeout=30)(add).timeout == 30.0
    assert autotune(configs=BLOCKS)(add).timeout == 100.0     # TileLang's default
    with pytest.raises(ValueError, match="timeout: expected seconds"):
        autotune(configs=BLOCKS, timeout="10s")


def test_failing_config_is_skipped_with_a_warning():
    configs = [{"block": 64, "threads": 2000}, {"block": 64}, {"block": 128, "threads": 64}]
    tuned = autotune(configs=configs, warmup=1, rep=1)(add)
    a, b, c = arrays()
    with pytest.warns(AutotuneWarning, match=r"'threads': 2000.*skipped: failed: ValueError: "
                                             r".*test_autotune.py, line \d+: `with T.Kernel"
                                             r".*T.Kernel threads: expected a count in "
                                             r"\[1, 1024\]"):
        tuned(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert tuned.timings[0][1] is None and tuned.best_config in configs[1:]


def test_no_valid_config_raises():
    configs = [{"threads": 0}, {"threads": 2000}]
    tuned = autotune(configs=configs, warmup=1, rep=1)(add)
    with pytest.warns(AutotuneWarning):
        with pytest.raises(RuntimeError, match=r"(?s)no config ran.*'threads': 0.*"
                                               r"'threads': 2000.*ValueError"):
            tuned(*arrays())


def test_config_with_different_results_is_excluded():
    configs = [{"block": 64}, {"block": 128, "scale": 2}, {"block": 256}]
    tuned = autotune(configs=configs, warmup=1, rep=1)(add)
    a, b, c = arrays()
    with pytest.warns(AutotuneWarning, match=r"'scale': 2.*results differ from config "
                                             r"\{'block': 64\}"):
        tuned(a, b, c)
    assert tuned.timings[1][1] is None and tuned.timings[1][2].startswith("results differ")
    assert tuned.best_config in (configs[0], configs[2])
    np.testing.assert_array_equal(c, a + b)


def test_in_place_kernel_sees_restored_inputs():
    tuned = autotune(configs=BLOCKS, warmup=2, rep=3)(accumulate)
    a, _, _ = arrays()
    c0 = np.arange(a.size, dtype=np.float32)
    c = c0.copy()
    tuned(a, c)   # 4 checks + 4 timed runs (one each: simulated) + the final call, each from c0
    np.testing.assert_array_equal(c, c0 + a)
    assert all(note == "ok" for _, _, note in tuned.timings)


def test_best_config_persists_on_disk(cache_dir):
    first = Counting(add)
    tuned = Autotuner(first, BLOCKS, warmup=1, rep=1)
    a, b, c = arrays()
    tuned(a, b, c)
    # each config: 1 check + 1 timed call (a simulated kernel's time is one call's); + 1:
    # the reference config's check runs twice; + 1: the final call
    assert first.calls == 4 + 1 + 4 * 1 + 1
    assert len(list((cache_dir / "autotune").iterdir())) == 1
    second = Counting(add)
    again = Autotuner(second, BLOCKS, warmup=1, rep=1)
    c[:] = 0
    again(a, b, c)
    assert second.calls == 1   # the final call only
    np.testing.assert_array_equal(c, a + b)
    assert again.best_config == tuned.best_config
    assert [ms for _, ms, _ in again.timings] == [ms for _, ms, _ in tuned.timings]
    # another dtype is another key; other configs are another key
    other = Counting(add)
    Autotuner(other, BLOCKS, warmup=1, rep=1)(*arrays(dtype=np.float64))
    assert other.calls == 10
    fewer = Counting(add)
    Autotuner(fewer, BLOCKS[:2], warmup=1, rep=1)(a, b, c)
    assert fewer.calls == 2 + 1 + 2 * 1 + 1


def test_key_has_scalar_types_and_constexpr_values():
    counting = Counting(add)
    tuned = Autotuner(counting, BLOCKS[:2], warmup=1, rep=1)
    a, b, c = arrays()
    tuned(a, b, c, scale=2)
    np.testing.assert_array_equal(c, 2 * a + b)
    calls = counting.calls
    tuned(a, b, c, scale=3)   # another value of an untuned constexpr: tuned again
    # each config: 1 check + 1 timed call; the reference's check twice
    assert counting.calls == calls + 2 * 2 + 1 + 1
    scalar = Counting(axpy)
    tuned = Autotuner(scalar, BLOCKS[:2], warmup=1, rep=1)
    tuned(a, b, c, 2.0)
    tuned(a, b, c, 3.0)   # another run-time scalar value: the same key
    assert scalar.calls == 6 + 1
    np.testing.assert_allclose(c, 3 * a + b, rtol=1e-6)
    tuned(a, b, c, 3)     # another scalar type: another key
    assert scalar.calls == 7 + 6


def test_compile_uses_the_best_config():
    tuned = autotune(configs=BLOCKS[:2], warmup=1, rep=1)(add)
    a, b, c = arrays()
    tuned(a, b, c)
    handle = tuned.compile(a, b, c, target="cuda", arch="sm_90")
    assert ".entry" in handle.ptx


def test_compile_before_any_call_tunes_and_names_the_config():
    """TileLang's ``compile`` of an autotuned program is its call returning the kernel:
    it tunes on the arrays given and the kernel carries ``config``/``latency``."""
    tuned = autotune(configs=BLOCKS[:2], warmup=1, rep=1)(add)
    a, b, c = arrays()
    handle = tuned.compile(a, b, c, target="cuda", arch="sm_90")
    assert handle.config == tuned.best_config and handle.config in BLOCKS[:2]
    assert handle.latency > 0 and handle.ref_latency is None
    assert ".entry" in handle.ptx


def test_do_bench_cpu_and_validation():
    ms = do_bench(lambda: time.sleep(0.002), warmup=1, rep=5)
    assert 1.5 < ms < 200
    calls = []
    do_bench(lambda: calls.append(1), warmup=3, rep=4)
    assert len(calls) == 7
    for bad in (dict(warmup=-1), dict(rep=0), dict(rep=2.5), dict(warmup=True)):
        with pytest.raises(ValueError, match="do_bench"):
            do_bench(lambda: None, **bad)
    with pytest.raises(TypeError, match="callable"):
        do_bench(42)


@pytest.mark.gpu
def test_autotune_on_gpu():
    import torch
    tuned = autotune(configs=[{"block": 256}, {"block": 512}, {"block": 1024},
                              {"block": 2048}], warmup=2, rep=5)(add)
    a = torch.randn(100_003, device="cuda", dtype=torch.float16)
    b = torch.randn_like(a)
    c = torch.zeros_like(a)
    tuned(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert tuned.best_config in tuned.configs
    assert all(ms is not None for _, ms, _ in tuned.timings)


def test_a_result_two_runs_of_one_config_disagree_on_is_not_compared():
    """An output the kernel never writes (a T.empty output left alone when a flag is off,
    as TileLang's KDA example's QG/KG) holds whatever memory it got: the reference
    config runs twice and such a result is left out of the comparison of the others."""
    from tilejit.tuning.autotune import compare_results, settled_reference, snapshot
    written = np.arange(8, dtype=np.float32)
    first = [snapshot(written), snapshot(np.full(8, 7.0, np.float32))]
    again = [snapshot(written), snapshot(np.full(8, -3.0, np.float32))]
    reference = settled_reference(first, again)
    assert reference[1] is None and reference[0] is not None
    other = [snapshot(written), snapshot(np.full(8, 123.0, np.float32))]
    assert compare_results(reference, other) is None
    wrong = [snapshot(written + 1), snapshot(np.zeros(8, np.float32))]
    assert compare_results(reference, wrong) == "result 0: 8 of 8 elements differ"

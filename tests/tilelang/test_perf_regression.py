"""TileLang's performance-regression harness as its ``regression_*.py`` example scripts
call it: ``tilelang.testing.process_func(fn, **kwargs)`` records the latency ``fn``
returns under the script's case, ``tilelang.testing.regression()`` runs the calling
module's ``regression_*`` functions in name order and prints ``name: latency``; a
latency that stays non-positive is left out with a warning."""
import types

import pytest

import tilejit as tilelang
import tilejit.language as T


def _gemm_perf(M=64, N=64, K=32):
    """A kernel's ``run_regression_perf`` in the style of TileLang's examples: compile,
    then the profiler's latency."""
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), T.float16)
            b = T.alloc_shared((K, N), T.float16)
            c = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            T.copy(c, C)
    kernel = tilelang.compile(gemm, out_idx=[2])
    return kernel.get_profiler().do_bench(n_warmup=1, n_repeat=1)


def test_regression_runs_the_modules_cases_in_order_and_prints_them(capsys):
    module = types.ModuleType("regression_example_gemm")
    source = (
        "import tilejit as tilelang\n"
        "def regression_b():\n"
        "    tilelang.testing.process_func(perf, 'second', M=64)\n"
        "def regression_a():\n"
        "    tilelang.testing.process_func(perf)\n"
        "def helper():\n"
        "    raise AssertionError('not a case')\n"
        "results = tilelang.testing.regression()\n")
    module.perf = _gemm_perf
    module.perf.__module__ = "regression_example_gemm"
    exec(compile(source, "regression_example_gemm.py", "exec"), module.__dict__)
    results = module.results
    assert [(r.name, r.case) for r in results] == [("example_gemm", "a"), ("second", "b")]
    assert all(r.latency > 0 for r in results)
    out = capsys.readouterr().out
    assert "[1/2] a (" in out and "[2/2] b (" in out
    assert f"example_gemm: {results[0].latency}\nsecond: {results[1].latency}\n" in out


def test_a_latency_that_stays_non_positive_is_left_out_with_a_warning():
    from tilejit.tuning import regression as harness
    calls = []

    def never(x):
        calls.append(x)
        return 0.0
    harness.RESULTS.clear()
    with pytest.warns(RuntimeWarning, match="case: latency 0.0 <= 0 after 6 runs; left out"):
        tilelang.testing.process_func(never, "case", x=3)
    assert calls == [3] * 6 and harness.RESULTS == []
    with pytest.raises(TypeError, match="process_func: func must be callable, got int"):
        tilelang.testing.process_func(3)

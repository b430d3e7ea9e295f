"""TileLang's object autotuner: ``AutoTuner.from_kernel(...).set_compile_args(...)
.set_profile_args(...).run()`` and ``tilelang.autotuner.param``
(tilejit/tilelang/autotuner_class.py), as TileLang's autotune tests use it."""
import inspect
import warnings
from dataclasses import replace

import pytest
import torch

import tilejit.language as T
from tilejit.autotuner import AutoTuner, AutotuneWarning
from tilejit.autotuner.param import AutotuneResult, CompileArgs, ProfileArgs


def matmul_factory(M, N, K, wrong=False):
    def kernel(block_M=64, block_N=64, block_K=32, num_stages=0, threads=128):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
                 C: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (
                    bx, by):
                A_shared = T.alloc_shared((block_M, block_K), "float16")
                B_shared = T.alloc_shared((block_N, block_K), "float16")
                C_local = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                    T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                if wrong and num_stages == 1:
                    for i, j in T.Parallel(block_M, block_N):
                        C_local[i, j] = C_local[i, j] + 1
                T.copy(C_local, C[by * block_M, bx * block_N])
        return main
    return kernel


CONFIGS = [{"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": s} for s in (0, 1)]


def _tuner(M=128, N=128, K=128, configs=CONFIGS, wrong=False):
    return (AutoTuner.from_kernel(kernel=matmul_factory(M, N, K, wrong), configs=configs)
            .set_compile_args(out_idx=[-1])
            .set_profile_args(ref_prog=lambda A, B: A @ B.T))


def _key(tuner, fn):
    return tuner.generate_cache_key(inspect.signature(fn).parameters, {})


def test_the_cache_key_follows_compile_and_profile_arguments():
    def fn(block=128):
        return block
    tuner = AutoTuner(fn, configs=[{"block": 64}])
    tuner.compile_args = CompileArgs(out_idx=[0])
    first = _key(tuner, fn)
    tuner.compile_args = replace(tuner.compile_args, out_idx=[1])
    assert _key(tuner, fn) != first
    tuner.profile_args = ProfileArgs(skip_check=True)
    assert _key(tuner, fn) not in (first, None)
    tuner.profile_args = ProfileArgs(supply_prog=lambda params: [])
    assert _key(tuner, fn) is None             # a callback: no reusable identity


def test_in_simulation_the_first_config_that_compiles():
    bad = {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 0, "threads": 100}
    with pytest.warns(AutotuneWarning, match="threads"):
        result = _tuner(configs=[bad] + CONFIGS).run(warmup=1, rep=2)
    assert isinstance(result, AutotuneResult)
    assert result.config == CONFIGS[0] and result.latency is None
    assert ".entry" in result.libcode
    a, b = torch.randn(128, 128).half(), torch.randn(128, 128).half()
    torch.testing.assert_close(result.kernel(a, b).float(), (a.float() @ b.float().T),
                               rtol=2e-2, atol=2e-2)


def test_no_valid_config_is_an_error_naming_each():
    bad = {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 0, "threads": 100}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutotuneWarning)
        with pytest.raises(RuntimeError, match="no config ran successfully"):
            _tuner(configs=[bad]).run()


def test_a_configs_own_pass_configs_and_the_supply_type():
    """TileLang's per-config pass configs (compile options, not arguments of the
    factory) and ``supply_type``."""
    from tilejit import PassConfigKey, TensorSupplyType
    configs = [dict(CONFIGS[0], pass_configs={PassConfigKey.TL_DISABLE_WARP_SPECIALIZED:
                                              True})]
    result = (AutoTuner.from_kernel(kernel=matmul_factory(128, 128, 128), configs=configs)
              .set_compile_args(out_idx=[-1], pass_configs={PassConfigKey.TL_DISABLE_TMA_LOWER:
                                                            True})
              .set_profile_args(supply_type=TensorSupplyType.Integer, skip_check=True)
              .run(warmup=1, rep=2))
    assert result.config == configs[0] and result.kernel is not None


def test_configs_must_be_dicts():
    with pytest.raises(ValueError, match="non-empty list of dicts"):
        _tuner(configs=[]).run()


@pytest.mark.gpu
def test_on_the_gpu_timed_checked_against_the_reference():
    result = _tuner(256, 256, 256).run(warmup=3, rep=20)
    assert result.config in CONFIGS and result.latency > 0 and result.ref_latency > 0
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(result.kernel(a, b).float(), a.float() @ b.float().T,
                               rtol=2e-2, atol=2e-2)
    # a config whose results are wrong is skipped, with the reason
    with pytest.warns(AutotuneWarning, match="differ from the reference"):
        result = _tuner(256, 256, 256, wrong=True).run(warmup=3, rep=20)
    assert result.config == CONFIGS[0]

"""TileLang's ``AutotuneResult.save_to_disk(path)`` and ``AutotuneResult.load_from_disk(path,
compile_args)`` (its auto-tuning guide's "save and load"): the folder holds the config, the
latencies, the out_idx, the program factory's module and name and the kernel's PTX; the
loaded result compiles ``factory(**config)`` again."""
import functools
import json

import numpy as np
import pytest
import torch

import tilejit.language as T
from tilejit.autotuner import AutoTuner
from tilejit.autotuner.param import BEST_CONFIG_PATH, AutotuneResult, CompileArgs

CONFIGS = [{"block_M": 32, "num_stages": s} for s in (1, 2)]


def scaled_rows(M, N, block_M=32, num_stages=1):
    """B = 2 * A, a row block a program (a factory of the module: it can be loaded)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            A_s = T.alloc_shared((block_M, N), "float32")
            T.copy(A[bx * block_M, 0], A_s)
            for i, j in T.Parallel(block_M, N):
                B[bx * block_M + i, j] = A_s[i, j] * 2
    return main


def _tuned(M=64, N=64):
    return (AutoTuner.from_kernel(functools.partial(scaled_rows, M, N), configs=CONFIGS)
            .set_compile_args(out_idx=[-1]).run())


def test_a_saved_result_loads_and_its_kernel_runs(tmp_path):
    result = _tuned()
    result.save_to_disk(tmp_path / "best")
    files = sorted(p.name for p in (tmp_path / "best").iterdir())
    assert files == ["best_config.json", "device_kernel.ptx", "function.json", "latency.json",
                     "out_idx.json"]
    assert json.loads((tmp_path / "best" / BEST_CONFIG_PATH).read_text()) == result.config
    loaded = AutotuneResult.load_from_disk(tmp_path / "best", CompileArgs())
    assert (loaded.config, loaded.latency, loaded.ref_latency) == \
        (result.config, result.latency, result.ref_latency)
    assert ".entry" in loaded.libcode
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(loaded.kernel(a), 2 * a)      # the saved out_idx


def test_a_complete_folder_is_kept_and_a_partial_one_refused(tmp_path):
    result = _tuned()
    result.save_to_disk(tmp_path / "best")
    other = AutotuneResult(latency=1.0, config={"block_M": 64, "num_stages": 1},
                           factory=result.factory, compile_args=result.compile_args)
    other.save_to_disk(tmp_path / "best")            # already saved: TileLang's, kept
    assert AutotuneResult.load_from_disk(tmp_path / "best", CompileArgs()).config == \
        result.config
    assert AutotuneResult.load_from_disk(tmp_path / "none", CompileArgs()) is None
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / BEST_CONFIG_PATH).write_text("{}")
    with pytest.raises(ValueError, match="is not a saved result .no latency.json, "):
        AutotuneResult.load_from_disk(tmp_path / "half", CompileArgs())


def test_a_factory_another_process_cannot_import_is_saved_with_a_note(tmp_path):
    def local(block_M=32, num_stages=1):
        return scaled_rows(64, 64, block_M, num_stages)
    AutoTuner.from_kernel(local, configs=CONFIGS[:1]).run().save_to_disk(tmp_path / "r")
    with pytest.raises(ValueError, match="not a program factory to compile it with: .*local "
                                         "is defined inside a function"):
        AutotuneResult.load_from_disk(tmp_path / "r", CompileArgs(out_idx=[-1]))


@pytest.mark.gpu
def test_gpu_a_timed_result_saved_and_loaded(tmp_path):
    result = _tuned(256, 128)
    assert result.latency > 0
    result.save_to_disk(tmp_path / "best")
    loaded = AutotuneResult.load_from_disk(tmp_path / "best", CompileArgs())
    assert (loaded.config, loaded.latency) == (result.config, result.latency)
    a = torch.randn(256, 128, device="cuda")
    out = loaded.kernel(a)
    torch.testing.assert_close(out, 2 * a, rtol=0, atol=0)
    sim = AutotuneResult.load_from_disk(tmp_path / "best", CompileArgs(target="sim"))
    np.testing.assert_array_equal(sim.kernel(a.cpu().numpy()), out.cpu().numpy())

"""Issue 23: a config whose run divides by zero or reads out of bounds is skipped with
the warning every skipped config gets; the tuning run fails only when every config does."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.tuning.autotune import AutotuneWarning, autotune


@tilejit.kernel
def unguarded(A, C, block: T.constexpr = 32):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
        for i in T.Parallel(block):
            C[bx * block + i] = A[bx * block + i] * 2.0   # no bound check


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)


def arrays():
    a = np.arange(64, dtype=np.float32)
    return a, np.zeros(64, np.float32)


def test_zero_division_and_index_errors_skip_the_config():
    configs = [{"block": 0}, {"block": 128}, {"block": 32}]
    tuned = autotune(configs=configs, warmup=1, rep=1)(unguarded)
    a, c = arrays()
    with pytest.warns(AutotuneWarning) as record:
        tuned(a, c)
    messages = [str(w.message) for w in record]
    assert any("'block': 0" in m and "skipped: failed: ZeroDivisionError" in m
               for m in messages)
    assert any("'block': 128" in m and "skipped: failed: IndexError" in m for m in messages)
    np.testing.assert_array_equal(c, a * 2)
    assert tuned.best_config == {"block": 32}


def test_every_config_failing_still_raises():
    tuned = autotune(configs=[{"block": 0}, {"block": 128}], warmup=1, rep=1)(unguarded)
    with pytest.warns(AutotuneWarning):
        with pytest.raises(RuntimeError, match=r"(?s)no config ran.*ZeroDivisionError.*"
                                               r"IndexError"):
            tuned(*arrays())

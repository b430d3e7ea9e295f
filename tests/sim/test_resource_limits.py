"""What no supported GPU could run does not run in simulation either: the simulator
allows the most shared memory per block any supported GPU has (sm_90's 232448 bytes)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.target import Target
from tilejit.tuning.autotune import AutotuneWarning, autotune

LIMIT = 232448


@tilejit.kernel
def through_shared(A, B, n: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((n,), T.float32)
        T.copy(A[0:n], S)
        T.copy(S, B[0:n])


def test_simulator_limit_is_the_largest_gpu_limit():
    assert Target.sim().shared_limit == LIMIT == Target.cuda("sm_90").shared_limit
    assert Target.sim().shared_limit >= Target.cuda("sm_80").shared_limit


def test_256_kib_shared_tile_does_not_run_in_simulation():
    n = 256 * 1024 // 4
    a = np.ones(n, np.float32)
    with pytest.raises(CompileError, match=r"the kernel needs 262144 bytes of shared memory "
                                           r"\(S 262144 B\); the simulator allows at most "
                                           r"232448 bytes per block \(the most any supported "
                                           r"GPU has\)"):
        through_shared(a, np.zeros_like(a), n)


def test_shared_tile_at_the_limit_runs():
    n = LIMIT // 4
    a = np.arange(n, dtype=np.float32)
    b = np.zeros_like(a)
    through_shared(a, b, n)
    np.testing.assert_array_equal(a, b)


def test_gpu_message_names_the_arch():
    a = np.ones(LIMIT // 4, np.float32)
    with pytest.raises(CompileError, match=r"\(S 232448 B\); sm_80 allows at most 166912 "
                                           r"bytes per block\n"):
        through_shared.compile(a, a.copy(), LIMIT // 4, target="cuda", arch="sm_80")


def test_autotune_in_simulation_skips_a_config_over_the_limit():
    tuned = autotune(configs=[{"n": 256 * 1024 // 4}, {"n": 1024}], warmup=1, rep=1)(
        through_shared)
    a = np.arange(256 * 1024 // 4, dtype=np.float32)
    b = np.zeros_like(a)
    with pytest.warns(AutotuneWarning, match=r"'n': 65536.*232448 bytes"):
        tuned(a, b)
    assert tuned.best_config == {"n": 1024}
    np.testing.assert_array_equal(b[:1024], a[:1024])

"""A helper's and a ``@T.macro``'s integer arithmetic in the simulator, in the GPU's types:
on the GPU a helper is a Numba device function (``int8 + int8`` is int64 there, as in the
kernel), so the simulator runs helpers through the kernel's integer rewrite
(``sim/helpers.py``) rather than as plain Python (numpy would wrap in int8). Checked in
simulation against a Python reference of the GPU's types, in PTX (assembled for sm_80
and sm_90a) and, with ``-m gpu``, on the device against the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


def mean_of(a, b):
    """A plain helper: (a + b) // 2 of two int8 values, in int64 on the GPU."""
    return (a + b) // 2


@T.macro
def spread(a, b):
    """A macro that calls the helper: (a - b) * 3 and the mean."""
    return (a - b) * 3 + mean_of(a, b)


@tilejit.kernel
def helper_arithmetic(A, B, M, S):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            M[i] = mean_of(A[i], B[i])
            S[i] = spread(A[i], B[i])


def _inputs():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, 64).astype(np.int8)
    b = rng.integers(-128, 128, 64).astype(np.int8)
    a[:4], b[:4] = [100, 120, -100, 127], [100, 100, -120, 127]
    return a, b


def _reference(a, b):
    """The GPU's types: int64 arithmetic, the results stored as int32."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    mean = (a64 + b64) // 2
    return mean.astype(np.int32), ((a64 - b64) * 3 + mean).astype(np.int32)


def test_helpers_compute_in_the_gpus_types_in_the_simulator(ptxas):
    a, b = _inputs()
    m, s = np.zeros(64, np.int32), np.zeros(64, np.int32)
    tilejit.kernel(helper_arithmetic.func, target="sim")(a, b, m, s)
    want_m, want_s = _reference(a, b)
    np.testing.assert_array_equal(m, want_m)
    np.testing.assert_array_equal(s, want_s)
    assert m[0] == 100 and m[1] == 110       # numpy's int8 would give -28 and -18
    for arch in ("sm_80", "sm_90a"):
        ptxas(helper_arithmetic.compile(a, b, m, s, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_gpu_helpers_match_the_simulator():
    import torch
    a, b = _inputs()
    m, s = (torch.zeros(64, dtype=torch.int32, device="cuda") for _ in range(2))
    helper_arithmetic(torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda"), m, s)
    torch.cuda.synchronize()
    want_m, want_s = _reference(a, b)
    np.testing.assert_array_equal(m.cpu().numpy(), want_m)
    np.testing.assert_array_equal(s.cpu().numpy(), want_s)

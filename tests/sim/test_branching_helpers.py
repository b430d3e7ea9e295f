"""Helpers that branch on their values (``if x < 0: return 0``), called in a T.Parallel
body: on the GPU a device function with real branches, in the simulator run lane by lane
(``sim/helpers.py``: the branches masked as a T.Parallel body's, the returns one exit, a
``raise`` or ``assert`` only where a lane reaches it). Checked against numpy, the PTX
assembled, and on the device against the simulator.

PYTEST_DONT_REWRITE: the helpers' asserts are plain Python's."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def relu(x):
    if x < 0:
        return x * 0
    return x


def piecewise(x, k):
    y = x * 2
    if x > 1.0:
        y = x + 1
    elif x < -1.0:
        if k > 0:
            return -x
        y = x - k
    else:
        y = y * 0.5
    return y + 0.25


def checked_sqrt(x):
    assert x >= 0, "negative input"
    return T.sqrt(x)


@T.prim_func
def branching(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32"),
              C: T.Tensor((256,), "float32"), D: T.Tensor((256,), "float32"), k: T.int32):
    with T.Kernel(2, threads=64) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = relu(A[bx * 128 + i])
            C[bx * 128 + i] = piecewise(A[bx * 128 + i], k)
            D[bx * 128 + i] = checked_sqrt(T.abs(A[bx * 128 + i]))


def _expected(a, k):
    pw = np.where(a > 1.0, a + 1, np.where(a < -1.0, a - k, a)) + 0.25
    if k > 0:
        pw = np.where(a < -1.0, -a, pw)         # the early return
    return np.maximum(a, 0), pw, np.sqrt(np.abs(a))


@pytest.mark.parametrize("k", [2, -3])
def test_branching_helpers_run_lane_by_lane(k):
    a = torch.linspace(-3, 3, 256)
    b, c, d = torch.zeros(256), torch.zeros(256), torch.zeros(256)
    tilelang.compile(branching, target="sim")(a, b, c, d, k)
    for got, want in zip((b, c, d), _expected(a.numpy(), k)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_an_assert_fails_only_where_a_lane_reaches_it():
    @T.prim_func
    def under_a_branch(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                if A[i] >= 0:
                    B[i] = checked_sqrt(A[i])
    a = torch.linspace(-1, 1, 64)
    b = torch.zeros(64)
    tilelang.compile(under_a_branch, target="sim")(a, b)     # negative lanes never call it
    np.testing.assert_allclose(b.numpy(), np.sqrt(np.maximum(a.numpy(), 0)), rtol=1e-6)

    @T.prim_func
    def everywhere(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = checked_sqrt(A[i])
    with pytest.raises(AssertionError, match="negative input"):
        tilelang.compile(everywhere, target="sim")(a, b)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_branching_helpers_assemble(arch, ptxas):
    ptxas(tilelang.compile(branching, target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_branching_helpers_on_the_gpu():
    a = torch.linspace(-3, 3, 256, device="cuda")
    out = [torch.zeros(256, device="cuda") for _ in range(3)]
    tilelang.compile(branching)(a, *out, 2)
    sim = [torch.zeros(256) for _ in range(3)]
    tilelang.compile(branching, target="sim")(a.cpu(), *sim, 2)
    for got, want, ref in zip(out, sim, _expected(a.cpu().numpy(), 2)):
        np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6, atol=1e-6)

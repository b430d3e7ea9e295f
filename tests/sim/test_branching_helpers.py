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


# -- a review's findings ------------------------------------------------------------------
def scaled(x, scales):
    y = x
    if scales:                  # a tuple of the program's: Python's truth, not lanes
        y = x * scales[0]
    return y


def count(flag):
    if flag:
        return 4
    return 2


def ordered(x, y):
    if x < y:
        lo, hi = x, y
    else:
        lo, hi = y, x
    return lo, hi


def signed(x):
    if x < 0:
        return x, 1
    return -x, 2


@T.prim_func
def review_cases(A: T.Tensor((32,), "float32"), S: T.Tensor((32,), "float32"),
                 P: T.Tensor((32,), "float32"), L: T.Tensor((32,), "float32"),
                 H: T.Tensor((32,), "float32"), V: T.Tensor((32,), "float32"),
                 W: T.Tensor((32,), "int32")):
    with T.Kernel(1, threads=32) as bx:
        for i in T.serial(32):
            S[i] = scaled(A[i], (2.0, 0.0))
        for i in T.Parallel(32):
            P[i] = scaled(A[i], (2.0, 0.0))
            if A[i] > 3:                       # a one-value helper under a lane branch
                s = T.alloc_var(T.float32)
                s = 0.0
                for _k in T.serial(count(True)):
                    s += A[i]
                P[i] = s
            lo, hi = ordered(A[i], T.float32(3.5))
            L[i] = lo
            H[i] = hi
            v, w = signed(A[i] - 4)
            V[i] = v
            W[i] = w


def _review_expected(a):
    p = np.where(a > 3, a * 4, a * 2)
    v = np.where(a - 4 < 0, a - 4, -(a - 4))
    return (a * 2, p, np.minimum(a, 3.5), np.maximum(a, 3.5), v,
            np.where(a - 4 < 0, 1, 2).astype(np.int32))


def test_a_reviews_helper_cases():
    a = torch.arange(32, dtype=torch.float32)
    outs = [torch.zeros(32) for _ in range(5)] + [torch.zeros(32, dtype=torch.int32)]
    tilelang.compile(review_cases, target="sim")(a, *outs)
    for got, want in zip(outs, _review_expected(a.numpy())):
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.gpu
def test_a_reviews_helper_cases_on_the_gpu():
    a = torch.arange(32, dtype=torch.float32, device="cuda")
    outs = [torch.zeros(32, device="cuda") for _ in range(5)] + [
        torch.zeros(32, dtype=torch.int32, device="cuda")]
    tilelang.compile(review_cases)(a, *outs)
    for got, want in zip(outs, _review_expected(a.cpu().numpy())):
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_a_tuple_assigned_under_a_lane_branch_in_a_kernel():
    @T.prim_func
    def swap(A: T.Tensor((8,), "float32"), L: T.Tensor((8,), "float32"),
             H: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                lo = A[i]
                hi = A[i]
                if A[i] < 3.5:
                    lo, hi = A[i], T.float32(3.5)
                else:
                    lo, hi = T.float32(3.5), A[i]
                L[i] = lo
                H[i] = hi
    a, lo, hi = torch.arange(8.0), torch.zeros(8), torch.zeros(8)
    tilelang.compile(swap, target="sim")(a, lo, hi)
    np.testing.assert_array_equal(lo.numpy(), np.minimum(a.numpy(), 3.5))
    np.testing.assert_array_equal(hi.numpy(), np.maximum(a.numpy(), 3.5))

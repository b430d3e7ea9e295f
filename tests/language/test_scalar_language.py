"""Scalar language in kernels: casts, min/max/abs, ceildiv, strides, infinity, weak
literals; in simulation, as PTX, and on the GPU against torch and the simulator."""
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def mixed(X, Y, Z, lo):
    N = X.shape[0]
    s = X.strides[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            k = bx * 128 + i
            if k < N:
                x = T.cast(X[k * s // s], T.float32)
                y = T.min(T.max(x, lo), 2.5)
                Y[k] = T.cast(T.abs(y) * 3, Y.dtype)
                Z[k] = T.if_then_else(x > 0, T.infinity(T.float32), -x)


def reference(x, lo):
    xf = x.astype(np.float32)
    y = np.fmin(np.fmax(xf, np.float32(lo)), np.float32(2.5))
    return np.abs(y) * np.float32(3), np.where(xf > 0, np.float32(np.inf), -xf)


@pytest.mark.parametrize("xdtype", ["float16", "float32", "float64", "int32"])
@pytest.mark.parametrize("ydtype", ["float16", "int32", "float32"])
def test_mixed_in_simulation(xdtype, ydtype):
    x = (np.random.default_rng(3).standard_normal(300) * 4).astype(xdtype)
    y = np.zeros(300, ydtype)
    z = np.zeros(300, np.float32)
    mixed(x, y, z, -1.5)
    ry, rz = reference(x, -1.5)
    expected = ry.astype(ydtype) if ydtype != "int32" else np.trunc(ry).astype(np.int32)
    np.testing.assert_allclose(y.astype(np.float64), expected.astype(np.float64), rtol=1e-3)
    np.testing.assert_array_equal(z, rz)


def test_mixed_compiles_without_float64_math():
    x = np.zeros(300, np.float16)
    ptx = mixed.compile(x, x.copy(), np.zeros(300, np.float32), -1.5, target="cuda",
                        arch="sm_90").ptx
    assert "max.f32" in ptx and "min.f32" in ptx and "abs.f32" in ptx
    assert "cvt.rn.f16.f32" in ptx or "cvt.rn.f16" in ptx


def test_constant_folding_of_tile_extents():
    @tilejit.kernel
    def doubled(A, B: T.constexpr = 64):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(B * 2 + bx * 0 if False else B * 2):
                A[i] = i

    a = np.zeros(128, np.int32)
    doubled(a)
    np.testing.assert_array_equal(a, np.arange(128))


def test_breakpoint_stops_in_the_kernel_source(monkeypatch):
    stops = []

    def hook(*args, **kwargs):
        frame = sys._getframe(1)
        stops.append((frame.f_code.co_filename, frame.f_lineno))

    monkeypatch.setattr(sys, "breakpointhook", hook)

    @tilejit.kernel
    def stop_here(A):
        with T.Kernel(1, threads=32) as bx:
            breakpoint()  # BREAK-LINE
            A[bx] = 1

    a = np.zeros(1, np.int32)
    stop_here(a)
    assert a[0] == 1
    filename, lineno = stops[0]
    assert filename == __file__
    with open(__file__) as f:
        assert "BREAK-LINE" in f.read().splitlines()[lineno - 1]


@pytest.mark.gpu
@pytest.mark.parametrize("xdtype", ["float16", "bfloat16", "float32", "float64", "int32"])
def test_mixed_on_gpu(xdtype):
    import torch
    x = (torch.randn(5000, device="cuda") * 4).to(getattr(torch, xdtype))
    y = torch.zeros(5000, device="cuda", dtype=torch.float16)
    z = torch.zeros(5000, device="cuda")
    mixed(x, y, z, -1.5)
    torch.cuda.synchronize()
    xf = x.float()
    ref_y = (torch.clamp(xf, -1.5, 2.5).abs() * 3).half()
    ref_z = torch.where(xf > 0, torch.full_like(xf, float("inf")), -xf)
    torch.testing.assert_close(y, ref_y, rtol=0, atol=0)
    torch.testing.assert_close(z, ref_z, rtol=0, atol=0)
    ys, zs = torch.zeros(5000, dtype=torch.float16), torch.zeros(5000)
    mixed(x.cpu(), ys, zs, -1.5)
    torch.testing.assert_close(y.cpu(), ys, rtol=0, atol=0)
    torch.testing.assert_close(z.cpu(), zs, rtol=0, atol=0)


@tilejit.kernel
def int_or_float_literal(X, Y, n):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            Y[i] = T.if_then_else(X[i] > 0, i * n, 0.5)


def test_an_integer_and_a_float_literal_unify_to_float32():
    """The branches of T.if_then_else: an int64 expression and a float literal (this was
    an internal compiler error: numpy asked to promote 'weak_float')."""
    x = np.where(np.arange(32) % 2 == 0, 1.0, -1.0).astype(np.float32)
    y = np.zeros(32, np.float32)
    int_or_float_literal(x, y, 3)
    np.testing.assert_array_equal(y, np.where(x > 0, np.arange(32) * 3, 0.5))


@tilejit.kernel
def band(X, Y, lo: T.constexpr = 3, hi: T.constexpr = 20):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            if lo < i <= hi < 32:
                Y[i] = X[i]
            else:
                Y[i] = 0.0


def test_a_chained_comparison_in_a_parallel_loop():
    """``lo < i <= hi`` per lane, in the simulator as on the GPU (was: numpy's 'truth value
    of an array is ambiguous')."""
    x = np.arange(1, 33, dtype=np.float32)
    y = np.full(32, -1.0, np.float32)
    band(x, y)
    np.testing.assert_array_equal(y, np.where((3 < np.arange(32)) & (np.arange(32) <= 20),
                                              x, 0.0))
    ptx = band.compile(x, y, target="cuda", arch="sm_80").ptx
    assert ".entry" in ptx


# T.clamp met outside the front end's rewrite: in a function picked from a dict at a
# compile-time key, compiled from its bytecode (TileLang's tests hold ops this way)
_OPS = {"clamp": lambda a, lo, hi: T.clamp(a, lo, hi), "max": lambda a, lo, hi: T.max(a, lo)}


@tilejit.kernel
def picked_op(X, Y, lo: T.float32, hi: T.float32, op: T.constexpr = "clamp"):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                Y[bx * 128 + i] = _OPS[op](X[bx * 128 + i], lo, hi)


def test_clamp_in_a_function_from_a_dict(ptxas):
    x = np.array([-3.0, -0.5, 0.0, 0.25, 2.0, np.nan, -np.inf, np.inf] * 20, np.float32)
    y = np.zeros_like(x)
    picked_op(x, y, -1.0, 1.0)
    want = np.minimum(np.maximum(np.nan_to_num(x, nan=-1.0), -1.0), 1.0)   # NaN → lo
    np.testing.assert_array_equal(y, want)
    ptx = picked_op.compile(x, y, -1.0, 1.0, target="cuda", arch="sm_90a").ptx
    assert "max.f32" in ptx and "min.f32" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_clamp_in_a_function_from_a_dict_on_the_gpu():
    import torch
    x = torch.tensor([-3.0, -0.5, 0.0, 0.25, 2.0, float("nan"), -float("inf")] * 30)
    y = torch.zeros_like(x)
    picked_op(x.cuda(), y_gpu := y.cuda(), -1.0, 1.0)
    picked_op(x, y, -1.0, 1.0)
    torch.testing.assert_close(y_gpu.cpu(), y, rtol=0, atol=0)
    torch.testing.assert_close(y, torch.clamp(torch.nan_to_num(x, nan=-1.0), -1.0, 1.0),
                               rtol=0, atol=0)

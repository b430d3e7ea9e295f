"""T.sin, cos, tan, exp10, log10, log1p, trunc, nearbyint, round, isnan, isinf,
isfinite, copysign, popcount, clz and the bit operations (language/scalar_math.py).

1. simulation against numpy (float64 references), dtype rules and errors;
2. accuracy of the GPU routines without a GPU: the IR builders compiled for the host
   CPU (as tests/language/test_math.py does) against float64 / long double;
3. PTX for float32, float16 and bfloat16 on sm_80 and sm_90a, assembled by ptxas;
4. on the GPU: against torch's float64 functions and the simulator.
"""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from host_math import HostRoutines, ulps as _ulps

ARCHS = ("sm_80", "sm_90a")
ROWS = ("sin", "cos", "tan", "exp10", "log10", "log1p", "trunc", "nearbyint", "round_even",
        "round_away", "copysign", "isnan", "isinf", "isfinite")


@tilejit.kernel
def scalar_math(X, Y, R):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            k = bx * 128 + i
            if k < N:
                x = X[k]
                R[0, k] = T.sin(x)
                R[1, k] = T.cos(x)
                R[2, k] = T.tan(x)
                R[3, k] = T.exp10(x)
                R[4, k] = T.log10(x)
                R[5, k] = T.log1p(x)
                R[6, k] = T.trunc(x)
                R[7, k] = T.nearbyint(x)
                R[8, k] = T.round(x)
                R[9, k] = T.round(x, rounding_mode="ties-away-from-zero")
                R[10, k] = T.copysign(Y[k], x)
                R[11, k] = T.if_then_else(T.isnan(x), 1.0, 0.0)
                R[12, k] = T.if_then_else(T.isinf(x), 1.0, 0.0)
                R[13, k] = T.if_then_else(T.isfinite(x), 1.0, 0.0)


scalar_math_fast = tilejit.kernel(fast_math=True)(scalar_math.func)


@tilejit.kernel
def bits(A, B, R):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            k = bx * 128 + i
            if k < N:
                R[0, k] = T.popcount(A[k])
                R[1, k] = T.clz(A[k])
                R[2, k] = T.bitwise_and(A[k], B[k])
                R[3, k] = T.bitwise_or(A[k], B[k])
                R[4, k] = T.bitwise_xor(A[k], B[k])
                R[5, k] = T.bitwise_not(A[k])
                R[6, k] = T.shift_left(A[k], 3)
                R[7, k] = T.shift_right(A[k], B[k] & 7)


def _ref(x, y):
    with np.errstate(all="ignore"):
        xd = x.astype(np.float64)
        t = np.trunc(xd)
        away = np.where(np.abs(xd - t) >= 0.5, t + np.sign(xd), t)
        rows = [np.sin(xd), np.cos(xd), np.tan(xd), np.power(10.0, xd), np.log10(xd),
                np.log1p(xd), t, np.rint(xd), np.rint(xd), away,
                np.copysign(y.astype(np.float64), xd), np.isnan(xd), np.isinf(xd),
                np.isfinite(xd)]
    return np.array(rows, np.float64)


def _inputs(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-10, 10, n), rng.uniform(-40, 40, n // 4),
                        np.round(rng.uniform(-9, 9, 64)) + 0.5,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -0.999, 2.5, -2.5,
                         2.0 ** 18, -(2.0 ** 18) - 0.25]])
    return x.astype(np.float32), rng.standard_normal(x.size).astype(np.float32)


# -- 1. simulation -----------------------------------------------------------------------

def test_simulation_against_float64():
    x, y = _inputs()
    r = np.zeros((len(ROWS), x.size), np.float32)
    scalar_math(x, y, r)
    ref = _ref(x, y)
    for row, name in enumerate(ROWS):
        # numpy's float32 exp10 / log10 / log1p: a few ulp; the rest rounds float64 once
        tol = 3.0 if name in ("exp10", "log10", "log1p") else 0.5
        err = _ulps(r[row], ref[row])
        worst = int(np.argmax(err))
        assert err[worst] <= tol, (name, x[worst], r[row][worst], ref[row][worst])


def test_bits_in_simulation():
    rng = np.random.default_rng(1)
    a = rng.integers(-2 ** 31, 2 ** 31, 500, dtype=np.int64).astype(np.int32)
    a[:3] = (0, -1, 1)
    b = rng.integers(0, 2 ** 31, 500, dtype=np.int64).astype(np.int32)
    r = np.zeros((8, 500), np.int32)
    bits(a, b, r)
    u = a.view(np.uint32).astype(np.uint64)
    assert (r[0] == [bin(int(v)).count("1") for v in u]).all()
    assert (r[1] == [32 - int(v).bit_length() for v in u]).all()
    assert (r[2] == a & b).all() and (r[3] == a | b).all() and (r[4] == a ^ b).all()
    assert (r[5] == ~a).all() and (r[6] == a << 3).all() and (r[7] == a >> (b & 7)).all()


def test_float64_trigonometry_is_refused_on_both_targets():
    x = np.zeros(128, np.float64)
    with pytest.raises(TypeError, match="T.sin: float64 is not supported"):
        T.sin(x)
    with pytest.raises(CompileError, match="T.sin: float64 is not supported"):
        scalar_math.compile(x, x, np.zeros((len(ROWS), 128)), target="cuda", arch="sm_90a")


def test_an_unknown_rounding_mode_is_an_error():
    with pytest.raises(ValueError, match="rounding_mode"):
        T.round(np.float32(1.5), "ties-to-odd")


# -- 2. the GPU routines on the host -------------------------------------------------------

@pytest.fixture(scope="module")
def host():
    from tilejit.codegen.lowering import math as M
    from tilejit.codegen.lowering.scalar_math import FLOAT_UNARY
    return HostRoutines(FLOAT_UNARY, M.F32)


def _trig_inputs():
    rng = np.random.default_rng(7)
    parts = [rng.uniform(-7, 7, 20000), rng.uniform(-3e5, 3e5, 20000),
             10.0 ** rng.uniform(5, 38.5, 20000) * rng.choice([-1, 1], 20000),
             rng.integers(0, 2 ** 31 - 2 ** 23, 20000).astype(np.int64)]
    x = np.concatenate(parts[:3]).astype(np.float32)
    random_bits = parts[3].astype(np.uint32).view(np.float32)       # every exponent
    # floats closest to multiples of pi/2 (hard cases for the reduction)
    near = np.float32(np.pi / 2) * np.arange(1, 2000, dtype=np.float32)
    return np.concatenate([x, random_bits, near, np.nextafter(near, np.float32(np.inf)),
                           np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 2 ** 18,
                                       np.nextafter(np.float32(2 ** 18), 0), 3.4e38])])


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trigonometry_within_an_ulp_over_the_float_range(host, name):
    x = _trig_inputs()
    got = host(name, x)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x.astype(np.float64))
    err = _ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, (name, x[worst], got[worst], ref[worst])
    zeros = np.float32([0.0, -0.0])
    if name != "cos":
        assert (np.signbit(host(name, zeros)) == [False, True]).all()


@pytest.mark.parametrize("name", ["exp10", "log10", "log1p"])
def test_exp10_log10_log1p_within_two_ulps(host, name):
    rng = np.random.default_rng(3)
    if name == "exp10":
        x = np.concatenate([rng.uniform(-46, 39, 40000), [0.0, 1.0, 2.0, -45.5, 38.5, 39.0,
                                                          -50.0, np.nan, np.inf, -np.inf]])
    else:
        x = np.concatenate([10.0 ** rng.uniform(-38, 38, 40000), rng.uniform(-0.99, 1, 20000),
                            rng.uniform(-1e-6, 1e-6, 5000), [0.0, -0.0, -1.0, -2.0, np.inf,
                                                             np.nan, 1.0, 10.0, 1e-30]])
    x = x.astype(np.float32)
    got = host(name, x)
    fn = {"exp10": lambda a: np.power(10.0, a), "log10": np.log10, "log1p": np.log1p}[name]
    with np.errstate(all="ignore"):
        ref = fn(x.astype(np.float64))
    err = _ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 2.0, (name, x[worst], got[worst], ref[worst])


# -- 3. PTX ------------------------------------------------------------------------------

def _args(dtype, n=256):
    if dtype == "bfloat16":
        import torch
        x = torch.zeros(n, dtype=torch.bfloat16)
        return x, x.clone(), torch.zeros((len(ROWS), n), dtype=torch.bfloat16)
    x = np.zeros(n, dtype)
    return x, x.copy(), np.zeros((len(ROWS), n), dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ptx_assembles(dtype, arch, ptxas):
    ptx = scalar_math.compile(*_args(dtype), target="cuda", arch=arch).ptx
    assert not re.search(r"^\s*call", ptx, re.M), "a call in the math code"
    assert "sin.approx" not in ptx and "cos.approx" not in ptx
    for instruction in ("cvt.rzi.f32.f32", "cvt.rni.f32.f32"):
        assert instruction in ptx, instruction
    ptxas(ptx, arch)
    a = np.zeros(128, np.int32)
    ptx = bits.compile(a, a, np.zeros((8, 128), np.int32), target="cuda", arch=arch).ptx
    assert "popc.b32" in ptx and "clz.b32" in ptx
    ptxas(ptx, arch)


def test_fast_math_uses_the_special_function_unit(ptxas):
    ptx = scalar_math_fast.compile(*_args("float32"), target="cuda", arch="sm_90a").ptx
    assert "sin.approx.f32" in ptx and "cos.approx.f32" in ptx
    ptxas(ptx, "sm_90a")


# -- 4. GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_against_float64_and_the_simulator():
    import torch
    x, y = _inputs(seed=2)
    x = np.concatenate([x, _trig_inputs()[::7]]).astype(np.float32)
    y = np.resize(y, x.size)
    r_sim = np.zeros((len(ROWS), x.size), np.float32)
    scalar_math(x, y, r_sim)
    r = torch.zeros((len(ROWS), x.size), device="cuda")
    scalar_math(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), r)
    r = r.cpu().numpy()
    ref = _ref(x, y)
    for row, name in enumerate(ROWS):
        tol = 2.0 if name in ("exp10", "log10", "log1p") else (1.0 if name in
                                                              ("sin", "cos", "tan") else 0.0)
        err = _ulps(r[row], ref[row])
        worst = int(np.argmax(err))
        assert err[worst] <= tol, (name, x[worst], r[row][worst], ref[row][worst])
        if name in ("sin", "cos", "tan"):
            # the simulator rounds the float64 result once, as the GPU does
            assert (_ulps(r[row], r_sim[row].astype(np.float64)) <= 1.0).all(), name
    a = np.random.default_rng(4).integers(-2 ** 31, 2 ** 31, 4096, dtype=np.int64).astype(np.int32)
    b = np.abs(a[::-1]).astype(np.int32)
    got = torch.zeros((8, a.size), dtype=torch.int32, device="cuda")
    bits(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), got)
    want = np.zeros((8, a.size), np.int32)
    bits(a, b, want)
    assert (got.cpu().numpy() == want).all()


def test_max_and_min_of_mixed_signedness_are_refused():
    """``T.max(int32, uint32)``: the GPU read one operand in the other's type, which one
    by the argument order, where the simulator widened (a fuzz round's find): refused,
    naming both types; a Python number beside either stays the other's type."""
    @tilejit.kernel
    def mixed(X, Y, Z):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                Z[i] = T.max(X[i], Y[i])

    @tilejit.kernel
    def with_a_literal(Y, Z):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                Z[i] = T.min(Y[i], 7)

    x, y = np.array([-3, 5, 0, 1], np.int32), np.array([4, 2, 9, 1], np.uint32)
    with pytest.raises(tilejit.CompileError, match=r"T.max of int32 and uint32: one is "
                       r"signed, the other not"):
        mixed(x, y, np.zeros(4, np.int32))
    z = np.zeros(4, np.uint32)
    with_a_literal(y, z)
    assert z.tolist() == [4, 2, 7, 1]

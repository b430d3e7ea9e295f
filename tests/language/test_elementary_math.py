"""T.sinh, cosh, asin, acos, atan, asinh, acosh, atanh, atan2, hypot and fmod
(language/scalar_math.py, codegen/lowering/elementary.py).

1. simulation against numpy's float64 functions, and float64 refused on both targets;
2. accuracy of the GPU routines without a GPU: the IR builders compiled for this CPU
   (tests/support/host_math.py) against float64, within an ulp (fmod: bit for bit),
   special values included;
3. PTX for float32, float16 and bfloat16 on sm_80 and sm_90a, assembled by ptxas;
4. on the GPU: against float64 references and the simulator.
"""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from host_math import HostRoutines, ulps

UNARY = ("sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh")
NUMPY = {"sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
         "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
         "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod}
ROWS = UNARY + ("atan2", "hypot", "fmod")


@tilejit.kernel
def elementary(X, Y, R):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            k = bx * 128 + i
            if k < N:
                x = X[k]
                R[0, k] = T.sinh(x)
                R[1, k] = T.cosh(x)
                R[2, k] = T.asin(x)
                R[3, k] = T.acos(x)
                R[4, k] = T.atan(x)
                R[5, k] = T.asinh(x)
                R[6, k] = T.acosh(x)
                R[7, k] = T.atanh(x)
                R[8, k] = T.atan2(Y[k], x)
                R[9, k] = T.hypot(x, Y[k])
                R[10, k] = T.fmod(x, Y[k])


def _reference(x, y):
    with np.errstate(all="ignore"):
        xd, yd = x.astype(np.float64), y.astype(np.float64)
        return np.array([NUMPY[n](xd) for n in UNARY] + [np.arctan2(yd, xd), np.hypot(xd, yd),
                                                           np.fmod(xd, yd)])


def _inputs(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-1.2, 1.2, n), rng.uniform(-30, 30, n),
                        np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30])])
    y = np.concatenate([rng.uniform(-3, 3, 2 * n),
                        np.float32([-0.0, 0.0, np.inf, 2.0, -np.inf, 1.0, 0.0, -5.0])])
    return x.astype(np.float32), y.astype(np.float32)


def test_simulation_against_float64():
    x, y = _inputs()
    r = np.zeros((len(ROWS), x.size), np.float32)
    tilejit.kernel(elementary.func, target="sim")(x, y, r)
    ref = _reference(x, y)
    for row, name in enumerate(ROWS):
        assert (ulps(r[row], ref[row]) <= 1.0).all(), name


@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_float64_is_refused_on_both_targets(target):
    x = np.zeros(128, np.float64)
    r = np.zeros((len(ROWS), 128), np.float64)
    with pytest.raises((CompileError, TypeError), match="T.sinh: float64 is not supported"):
        if target == "sim":
            tilejit.kernel(elementary.func, target="sim")(x, x, r)
        else:
            elementary.compile(x, x, r, target="cuda", arch="sm_90a")


# -- 2. the GPU routines on the host --------------------------------------------------------
@pytest.fixture(scope="module")
def host():
    from tilejit.codegen.lowering import elementary as E
    from tilejit.codegen.lowering.math import F32
    return HostRoutines(E.UNARY, F32), HostRoutines(E.BINARY, F32, arity=2)


def _wide_inputs(name):
    with np.errstate(invalid="ignore"):        # signalling NaNs among the random bits
        return _wide_inputs_of(name)


def _wide_inputs_of(name):
    rng = np.random.default_rng(11)
    random_bits = rng.integers(0, 2 ** 32, 40000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([random_bits.view(np.float32).astype(np.float64),
                        rng.uniform(-1, 1, 40000),
                        rng.uniform(-100, 100, 20000), rng.uniform(-1e-3, 1e-3, 5000),
                        np.float32([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, np.inf, -np.inf,
                                    np.nan, 1e-45, -1e-45, 3.4e38, 89.4, 89.5, -89.5,
                                    np.nextafter(np.float32(1), 0),
                                    np.nextafter(np.float32(1), 2)])])
    if name == "acosh":
        x = np.concatenate([x, 1 + rng.uniform(0, 1e-3, 5000)])
    return x.astype(np.float32)


@pytest.mark.parametrize("name", UNARY)
def test_within_an_ulp_over_the_float_range(host, name):
    x = _wide_inputs(name)
    got = host[0](name, x)
    with np.errstate(all="ignore"):
        ref = NUMPY[name](x.astype(np.float64))
    err = ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, (name, x[worst], got[worst], ref[worst])
    if name not in ("cosh", "acos", "acosh"):           # odd functions keep a zero's sign
        assert (np.signbit(host[0](name, np.float32([0.0, -0.0]))) == [False, True]).all()


@pytest.mark.parametrize("name", ["atan2", "hypot"])
def test_two_argument_functions_within_an_ulp_and_c99s_special_cases(host, name):
    x, y = _wide_inputs("atan"), _wide_inputs("atan")[::-1].copy()
    specials = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45])
    sx, sy = (a.reshape(-1) for a in np.meshgrid(specials, specials))
    x, y = np.concatenate([x, sx]), np.concatenate([y, sy])
    got = host[1](name, y, x) if name == "atan2" else host[1](name, x, y)
    with np.errstate(all="ignore"):
        ref = (np.arctan2(y.astype(np.float64), x.astype(np.float64)) if name == "atan2"
               else np.hypot(x.astype(np.float64), y.astype(np.float64)))
    err = ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, (name, x[worst], y[worst], got[worst], ref[worst])
    if name == "atan2":                                  # the signs of zero results
        zeros = ref == 0
        assert (np.signbit(got[zeros]) == np.signbit(ref[zeros])).all()


def test_fmod_is_exact(host):
    rng = np.random.default_rng(2)
    with np.errstate(all="ignore"):
        bits = rng.integers(0, 2 ** 32, 100000, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32).copy()
        y = rng.permutation(x)
        specials = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.4e38,
                               1e-45, 2.5, -7.0])
        sx, sy = (a.reshape(-1) for a in np.meshgrid(specials, specials))
        x = np.concatenate([x, sx, rng.uniform(-100, 100, 5000).astype(np.float32)])
        y = np.concatenate([y, sy, rng.uniform(-3, 3, 5000).astype(np.float32)])
        ref = np.fmod(x, y)
    got = host[1]("fmod", x, y)
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    bad = np.flatnonzero(~same)[:4]
    assert same.all(), list(zip(x[bad], y[bad], got[bad], ref[bad]))


# -- 3. PTX --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_assembles(dtype, arch, ptxas):
    if dtype == "bfloat16":
        import torch
        x = torch.zeros(256, dtype=torch.bfloat16)
        args = (x, x.clone(), torch.zeros((len(ROWS), 256), dtype=torch.bfloat16))
    else:
        x = np.zeros(256, dtype)
        args = (x, x.copy(), np.zeros((len(ROWS), 256), dtype))
    ptx = elementary.compile(*args, target="cuda", arch=arch).ptx
    assert "sqrt.rn.f64" in ptx and "div.rn.f64" in ptx
    ptxas(ptx, arch)


# -- 4. on the GPU -------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gpu_against_float64_and_the_simulator(dtype):
    import torch
    x, y = _inputs(2000, seed=5)
    tdt = getattr(torch, dtype)
    tx, ty = torch.from_numpy(x).to(tdt), torch.from_numpy(y).to(tdt)
    out = torch.zeros((len(ROWS), x.size), dtype=tdt, device="cuda")
    elementary(tx.cuda(), ty.cuda(), out)
    sim = torch.zeros((len(ROWS), x.size), dtype=tdt)
    tilejit.kernel(elementary.func, target="sim")(tx, ty, sim)
    ref = _reference(tx.float().numpy(), ty.float().numpy())
    got = out.cpu().float().numpy()
    if dtype == "float32":
        assert (ulps(got, ref) <= 1.0).all()
        assert (ulps(got, sim.numpy().astype(np.float64)) <= 1.0).all()
    else:
        # the reference rounded to the dtype: what overflows it (sinh, cosh past 65504 in
        # float16) is infinite there too
        ref = torch.from_numpy(ref).to(tdt).double().numpy()
        tol = 2e-3 if dtype == "float16" else 1.6e-2
        finite = np.isfinite(ref)
        np.testing.assert_allclose(got[finite], ref[finite], rtol=tol, atol=tol)
        assert torch.equal(out.cpu().isnan(), sim.isnan())
        assert torch.equal(out.cpu().isinf(), sim.isinf())

"""TileLang's math intrinsics: ``T.ieee_add/sub/mul/fdiv/fmaf/frcp/fsqrt`` with an explicit
rounding mode, ``T.ieee_frsqrt``, and the fast ``T.__exp`` family (``T.fast_rcp`` too).

The simulator is checked against the definition (one rounding of the exact result: each
result brackets the exact value as its mode says, and round-to-nearest equals numpy's
correctly rounded float32/float64 arithmetic); the PTX uses the rounded instructions
and assembles for sm_80 and sm_90a; the GPU twins compare the device's results with the
simulator's bit for bit (the fast functions: with torch, within their approximations'
error)."""
from fractions import Fraction

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

torch = pytest.importorskip("torch")

N = 512
OPS = ("ieee_add", "ieee_sub", "ieee_mul", "ieee_fdiv", "ieee_fmaf", "ieee_frcp",
       "ieee_fsqrt")


def rounded_ops(dtype, mode):
    """Every rounded operation of A, B, C, by ``mode``, one output each."""
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype),
             Out: T.Tensor((7, N), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Out[0, i] = T.ieee_add(A[i], B[i], mode)
                Out[1, i] = T.ieee_sub(A[i], B[i], mode)
                Out[2, i] = T.ieee_mul(A[i], B[i], mode)
                Out[3, i] = T.ieee_fdiv(A[i], B[i], mode)
                Out[4, i] = T.ieee_fmaf(A[i], B[i], C[i], mode)
                Out[5, i] = T.ieee_frcp(A[i], mode)
                Out[6, i] = T.ieee_fsqrt(T.abs(A[i]), mode)
    return main


def operands(dtype, seed=0):
    """Values that round in every mode, and the special ones (zeros of both signs,
    infinities, NaN, subnormals, values whose product or sum overflows)."""
    rng = np.random.default_rng(seed)
    np_dtype = np.dtype(dtype)
    a = (rng.standard_normal(N) * np.exp2(rng.integers(-20, 20, N))).astype(np_dtype)
    b = (rng.standard_normal(N) * np.exp2(rng.integers(-20, 20, N))).astype(np_dtype)
    c = (rng.standard_normal(N) * np.exp2(rng.integers(-30, 10, N))).astype(np_dtype)
    fi = np.finfo(np_dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, fi.smallest_subnormal,
                        fi.max, -fi.max, 1.0, -1.0, 3.0], np_dtype)
    a[:12], b[12:24] = special, special
    a[24:28], b[24:28] = fi.max, np.array([2.0, -2.0, 1.5, fi.eps], np_dtype)
    a[28], b[28] = 1.0, -1.0                     # an exact zero sum: its sign by the mode
    return a, b, c


def simulate(dtype, mode, a, b, c):
    out = np.zeros((7, N), dtype)
    tilejit.compile(rounded_ops(dtype, mode), target="sim")(a, b, c, out)
    return out


def _exact(op, x, y, z):
    f = [Fraction(float(v)) for v in (x, y, z)]
    return {"ieee_add": f[0] + f[1], "ieee_sub": f[0] - f[1], "ieee_mul": f[0] * f[1],
            "ieee_fdiv": f[0] / f[1] if f[1] else None, "ieee_fmaf": f[0] * f[1] + f[2],
            "ieee_frcp": 1 / f[0] if f[0] else None}[op]


def _brackets(r, exact, mode, dtype):
    """Whether ``r`` is ``exact`` rounded by ``mode``: r on the mode's side of it and its
    neighbour on that side past it."""
    if not np.isfinite(r):
        return True                     # overflow: checked against numpy below for rn
    v = Fraction(float(r))
    np.seterr(over="ignore")
    up = Fraction(float(np.nextafter(r, dtype.type(np.inf)))) if np.isfinite(
        np.nextafter(r, dtype.type(np.inf))) else None
    down = Fraction(float(np.nextafter(r, dtype.type(-np.inf)))) if np.isfinite(
        np.nextafter(r, dtype.type(-np.inf))) else None
    if mode == "rd":
        return v <= exact and (up is None or up > exact)
    if mode == "ru":
        return v >= exact and (down is None or down < exact)
    if mode == "rz":
        away = up if exact > 0 else down
        return abs(v) <= abs(exact) and (away is None or abs(exact) < abs(away))
    return True


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["rn", "rz", "ru", "rd"])
def test_simulated_rounding_is_one_rounding_of_the_exact_result(dtype, mode):
    a, b, c = operands(dtype)
    out = simulate(dtype, mode, a, b, c)
    np_dtype = np.dtype(dtype)
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    for k, op in enumerate(OPS[:6]):
        for i in np.flatnonzero(finite):
            exact = _exact(op, a[i], b[i], c[i])
            if exact is None or exact == 0:
                continue
            assert _brackets(out[k, i], exact, mode, np_dtype), (op, a[i], b[i], out[k, i])
    if mode == "rn":
        # numpy's float32/float64 arithmetic is correctly rounded to nearest
        with np.errstate(all="ignore"):
            for k, expect in enumerate([a + b, a - b, a * b, a / b, None, 1 / a,
                                        np.sqrt(np.abs(a))]):
                if expect is not None:
                    np.testing.assert_array_equal(out[k], expect.astype(dtype))
    # square roots: r² on the mode's side of x, the neighbour's on the other
    for i in np.flatnonzero(np.isfinite(a) & (a != 0)):
        x, r = Fraction(float(abs(a[i]))), out[6, i]
        lo = Fraction(float(r)) if mode in ("rd", "rz") else Fraction(
            float(np.nextafter(r, np_dtype.type(0))))
        assert lo * lo <= x, (a[i], r)


def test_simulated_special_results():
    a = np.array([1.0, 1.0, 3e38, -3e38, 0.0, -0.0], np.float32)
    b = np.array([-1.0, -1.0, 10.0, 10.0, -0.0, -0.0], np.float32)
    assert np.signbit(T.ieee_add(a[0], b[0], "rd")) and not np.signbit(T.ieee_add(a[1], b[1],
                                                                                   "rn"))
    assert T.ieee_mul(a[2], b[2], "rz") == np.finfo(np.float32).max
    assert np.isinf(T.ieee_mul(a[2], b[2], "rn"))
    assert T.ieee_mul(a[3], b[3], "ru") == -np.finfo(np.float32).max
    assert np.signbit(T.ieee_add(a[5], b[5], "rn")) and not np.signbit(T.ieee_add(a[4], b[4],
                                                                                   "rn"))
    assert T.ieee_fmaf(np.float64(1), np.float64(1), np.float64(2.0**-60), "ru") == \
        np.nextafter(1.0, 2.0)
    assert np.isnan(T.ieee_fsqrt(np.float32(-1), "rz"))


def test_half_types_round_their_float32_result_to_nearest():
    a, b, c = (x.astype(np.float16) for x in operands("float32", seed=1))
    out = simulate("float16", "rn", a, b, c)
    with np.errstate(all="ignore"):
        f = [x.astype(np.float32) for x in (a, b, c)]
        np.testing.assert_array_equal(out[0], (f[0] + f[1]).astype(np.float16))
        np.testing.assert_array_equal(out[4], (f[0] * f[1] + f[2]).astype(np.float16))
        np.testing.assert_array_equal(out[6], np.sqrt(np.abs(f[0])).astype(np.float16))
    # float64 arithmetic rounded once to float16 is the same (double rounding through
    # float32 is harmless for +, -, ·, /, √): the correctly rounded half result
    with np.errstate(all="ignore"):
        d = [x.astype(np.float64) for x in (a, b)]
        np.testing.assert_array_equal(out[3], (d[0] / d[1]).astype(np.float16))


def test_frsqrt_is_float64s_quotient_rounded_to_float32():
    x = np.abs(operands("float32")[0]) + np.float32(1e-3)
    got = T.ieee_frsqrt(x)
    np.testing.assert_array_equal(got, (1 / np.sqrt(x.astype(np.float64))).astype(np.float32))
    with pytest.raises(TypeError, match="frsqrt is not supported for float64"):
        T.ieee_frsqrt(np.float64(2))


# -- errors -----------------------------------------------------------------------------
def test_an_invalid_rounding_mode_is_a_value_error_where_it_is_called():
    with pytest.raises(ValueError, match="Invalid rounding mode 'invalid_mode'"):
        T.ieee_add(1.0, 2.0, "invalid_mode")
    with pytest.raises(ValueError, match="Invalid rounding mode 'bad'"):
        T.ieee_fsqrt(4.0, "bad")


def _one(fn_name, dtype, mode=None):
    fn = getattr(T, fn_name)

    @T.prim_func
    def main(A: T.Tensor((32,), dtype), B: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = fn(A[i], mode) if mode is not None else fn(A[i])
    return main


@pytest.mark.parametrize("fn_name, dtype, mode, message", [
    ("ieee_fsqrt", "float16", "rz", r"Only rounding mode 'rn' is available for half "
                                    r"precision \(float16\)"),
    ("ieee_frcp", "bfloat16", "ru", r"Only rounding mode 'rn' is available for half "
                                    r"precision \(bfloat16\)"),
    ("ieee_frcp", "float32", "xy", "Invalid rounding mode"),
    ("ieee_frsqrt", "float64", None, "frsqrt is not supported for float64"),
    ("__exp", "int32", None, r"T\.__exp only supports floating-point inputs, but got int32"),
    ("__log", "float8_e4m3", None, r"T\.__log only supports floating-point inputs"),
    ("__sin", "float64", None, r"T\.__sin: float64 is not supported"),
])
def test_refused_at_compile_time_with_the_kernels_line(fn_name, dtype, mode, message):
    with pytest.raises(CompileError, match=message) as info:
        tilejit.compile(_one(fn_name, dtype, mode), target="cuda -arch=sm_90a").get_kernel_source()
    assert "test_math_intrinsics.py" in str(info.value)


# -- the PTX ------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_rounded_instructions_assemble(arch, ptxas):
    for dtype, modes in (("float32", ("rn", "rz", "ru", "rd")), ("float64", ("rz", "rd")),
                         ("float16", ("rn",)), ("bfloat16", ("rn",))):
        for mode in modes:
            ptx = tilejit.compile(rounded_ops(dtype, mode),
                                  target=f"cuda -arch={arch}").get_kernel_source()
            if dtype in ("float32", "float64"):
                bits = dtype[-2:]
                p = {"rn": "rn", "rz": "rz", "ru": "rp", "rd": "rm"}[mode]
                for ins in ("add", "mul", "div", "fma", "rcp", "sqrt"):
                    assert f"{ins}.{p}.f{bits}" in ptx, (ins, dtype, mode)
            ptxas(ptx, arch)


def fast_functions(dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), Out: T.Tensor((9, N), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Out[0, i] = T.__exp(A[i])
                Out[1, i] = T.__exp10(A[i])
                Out[2, i] = T.__log(T.abs(A[i]))
                Out[3, i] = T.__log2(T.abs(A[i]))
                Out[4, i] = T.__log10(T.abs(A[i]))
                Out[5, i] = T.__sin(A[i])
                Out[6, i] = T.__cos(A[i])
                Out[7, i] = T.__tan(A[i])
                Out[8, i] = T.fast_rcp(A[i])
    return main


def _fast_reference(x):
    x = x.astype(np.float64)
    return np.stack([np.exp(x), 10 ** x, np.log(np.abs(x)), np.log2(np.abs(x)),
                     np.log10(np.abs(x)), np.sin(x), np.cos(x), np.tan(x), 1 / x])


def test_fast_functions_simulate_the_accurate_ones():
    x = np.linspace(-1.5, 1.5, N).astype(np.float32)
    out = np.zeros((9, N), np.float32)
    tilejit.compile(fast_functions("float32"), target="sim")(x, out)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out, _fast_reference(x), rtol=2e-6, atol=1e-6)


def test_fast_functions_use_the_special_function_unit_without_fast_math(ptxas):
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(fast_functions("float32"),
                              target=f"cuda -arch={arch}").get_kernel_source()
        for ins in ("ex2.approx", "lg2.approx", "sin.approx", "cos.approx",
                    "rcp.approx.ftz.f32"):
            assert ins in ptx, ins
        ptxas(ptx, arch)
    ptx = tilejit.compile(fast_functions("float16"), target="cuda").get_kernel_source()
    assert "ex2.approx" in ptx and "sin.approx" in ptx


# -- on the GPU -----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype, mode", [
    ("float32", "rn"), ("float32", "rz"), ("float32", "ru"), ("float32", "rd"),
    ("float64", "rn"), ("float64", "rz"), ("float64", "ru"), ("float64", "rd"),
    ("float16", "rn"), ("bfloat16", "rn")])
def test_rounded_operations_on_gpu_equal_the_simulator(dtype, mode):
    host = operands("float32" if dtype == "bfloat16" else dtype, seed=2)
    tdt = getattr(torch, dtype)
    a, b, c = (torch.from_numpy(x).to(tdt) for x in host)
    out = torch.zeros(7, N, dtype=tdt, device="cuda")
    tilejit.compile(rounded_ops(dtype, mode))(a.cuda(), b.cuda(), c.cuda(), out)
    sim = torch.zeros(7, N, dtype=tdt)
    tilejit.compile(rounded_ops(dtype, mode), target="sim")(a, b, c, sim)
    got, want = out.cpu(), sim
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), [(OPS[k], i) for k, i in torch.nonzero(~same).tolist()[:8]]
    # and the sign of zeros (the exact zero sum's sign depends on the mode)
    zeros = want == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros]))
    if dtype != "bfloat16" and mode == "rn":
        # against torch's own float64 arithmetic rounded to the type (+, ·, √)
        d = [x.double() for x in (a, b)]
        torch.testing.assert_close(got[0], (d[0] + d[1]).to(tdt), rtol=0, atol=0,
                                   equal_nan=True)
        torch.testing.assert_close(got[2], (d[0] * d[1]).to(tdt), rtol=0, atol=0,
                                   equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fast_functions_on_gpu(dtype):
    tdt = getattr(torch, dtype)
    x = torch.linspace(-1.5, 1.5, N).to(tdt)
    out = torch.zeros(9, N, dtype=tdt, device="cuda")
    tilejit.compile(fast_functions(dtype))(x.cuda(), out)
    ref = torch.from_numpy(_fast_reference(x.float().numpy()))
    tol = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    finite = torch.isfinite(ref)
    torch.testing.assert_close(out.cpu().double()[finite], ref[finite], rtol=tol * 4,
                               atol=tol * 4)
    sim = torch.zeros(9, N, dtype=tdt)
    tilejit.compile(fast_functions(dtype), target="sim")(x, sim)
    torch.testing.assert_close(out.cpu().double()[finite], sim.double()[finite],
                               rtol=tol * 4, atol=tol * 4)


@pytest.mark.gpu
def test_frsqrt_on_gpu_equals_the_simulator():
    x = torch.rand(N, dtype=torch.float32) * 100 + 1e-3

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                B[i] = T.ieee_frsqrt(A[i])
    out = torch.zeros(N, device="cuda")
    tilejit.compile(main)(x.cuda(), out)
    sim = torch.zeros(N)
    tilejit.compile(main, target="sim")(x, sim)
    assert torch.equal(out.cpu(), sim)
    torch.testing.assert_close(out.cpu().double(), x.double().rsqrt(), rtol=1e-7, atol=0)


# -- AMDGPU (compile-verified): round to nearest through plain IEEE operations -------------
@tilejit.kernel
def _amdgpu_math(X, Y, R):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            R[0, i] = T.ieee_add(X[i], Y[i], "rn")
            R[1, i] = T.ieee_fdiv(X[i], Y[i])
            R[2, i] = T.__exp(X[i]) + T.ieee_frsqrt(X[i])


@tilejit.kernel
def _amdgpu_directed(X, Y, R):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            R[0, i] = T.ieee_add(X[i], Y[i], "rz")


def test_amdgpu_takes_round_to_nearest_and_names_the_directed_modes():
    x, r = np.zeros(64, np.float32), np.zeros((3, 64), np.float32)
    assert _amdgpu_math.compile(x, x, r, target="amdgpu", arch="gfx942").asm
    with pytest.raises(CompileError, match="T.ieee_add: rounding mode 'rz' needs NVIDIA's "
                                           "rounded instructions; on AMDGPU only 'rn'"):
        _amdgpu_directed.compile(x, x, r[:1], target="amdgpu", arch="gfx942")


def test_the_rounding_mode_by_keyword_and_no_contraction_on_amdgpu():
    @tilejit.kernel
    def mul_add(X, Y, Z, R):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                R[i] = T.ieee_add(T.ieee_mul(X[i], Y[i], rounding_mode="rn"), Z[i],
                                  rounding_mode="rz")
    x = np.zeros(64, np.float32)
    ptx = mul_add.compile(x, x, x, x, target="cuda", arch="sm_90a").ptx
    assert "mul.rn.f32" in ptx and "add.rz.f32" in ptx and "fma" not in ptx

    @tilejit.kernel
    def mul_add_rn(X, Y, Z, R):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                R[i] = T.ieee_add(T.ieee_mul(X[i], Y[i]), Z[i], rounding_mode="rn")
    asm = mul_add_rn.compile(x, x, x, x, target="amdgpu", arch="gfx942").asm
    assert "v_mul_f32" in asm and "v_add_f32" in asm and "v_fma" not in asm
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(64).astype(np.float32) for _ in range(3))
    out = np.zeros(64, np.float32)
    tilejit.kernel(mul_add_rn.func, target="sim")(a, b, c, out)
    np.testing.assert_array_equal(out, (a * b) + c)          # two roundings


def test_fast_rcp_of_float64_is_the_division_in_simulation():
    @T.prim_func
    def main(A: T.Tensor((3,), "float64"), B: T.Tensor((3,), "float64")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(3):
                B[i] = T.fast_rcp(A[i])
    a = np.array([3.0, 1e-40, 1e300])
    b = np.zeros(3)
    tilejit.compile(main, target="sim")(a, b)
    np.testing.assert_array_equal(b, 1 / a)

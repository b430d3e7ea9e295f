"""float8_e4m3 and float8_e5m2: the dtypes, the simulator's rounding (ml_dtypes, saturating
as PTX's cvt.rn.satfinite), the GPU's conversion IR run on this CPU against it for every
code and a dense sweep of float32 values, kernels on float8 tensors."""
import functools

import ml_dtypes
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language import numerics
from tilejit.language.dtypes import as_dtype

FP8 = {"float8_e4m3": (T.float8_e4m3, torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn, 448.0),
       "float8_e5m2": (T.float8_e5m2, torch.float8_e5m2, ml_dtypes.float8_e5m2, 57344.0)}


def test_dtype_names_and_conversions():
    assert T.float8_e4m3 == "float8_e4m3" and T.float8_e4m3fn == "float8_e4m3fn"
    assert as_dtype(T.float8_e4m3fn) is T.float8_e4m3 and T.float8_e4m3fn.held_in_float32
    assert as_dtype(torch.float8_e4m3fn) is T.float8_e4m3
    assert as_dtype(torch.float8_e5m2) is T.float8_e5m2
    assert as_dtype(np.dtype(ml_dtypes.float8_e4m3fn)) is T.float8_e4m3
    assert as_dtype("float8_e4m3fn") is T.float8_e4m3
    assert T.float8_e4m3.as_torch() is torch.float8_e4m3fn
    assert T.float8_e5m2.bits == 8 and T.float8_e5m2.itemsize == 1
    assert T.float8_e4m3.held_in_float32 and not T.float16.held_in_float32


def test_e4m3_saturates_and_e5m2_overflows_to_infinity():
    """e4m3 has no infinity: as PTX's cvt.rn.satfinite, past 448 (infinity included) is
    448. e5m2 has IEEE infinities: past its largest it rounds to infinity, as float16 and
    as torch's conversion do. NaN stays NaN; ties round to even."""
    x = np.array([1.0, 448 * 1.1, -1e30, np.inf, -np.inf, np.nan, 0.3, -0.0], np.float32)
    got = numerics.cast(x, T.float8_e4m3)
    assert list(got[[1, 2, 3, 4]]) == [448, -448, 448, -448] and np.isnan(got[5])
    assert got[6] == np.float32(np.float32(0.3).astype(ml_dtypes.float8_e4m3fn))
    assert np.signbit(got[7])
    y = np.array([57344 * 1.05, 61440, -1e30, np.inf, np.nan], np.float32)
    got = numerics.cast(y, T.float8_e5m2)
    assert got[0] == 57344 and got[1] == np.inf and got[2] == -np.inf
    assert got[3] == np.inf and np.isnan(got[4])
    want = torch.from_numpy(y).to(torch.float8_e5m2).float().numpy()
    assert np.array_equal(got, want, equal_nan=True)       # torch agrees


def test_infinity_of_e5m2_is_infinity():
    assert numerics.cast(np.float32(T.infinity(T.float8_e5m2)), T.float8_e5m2) == np.inf


class HostFloat8:
    """``codegen/lowering/scalar``'s float8 conversion IR compiled for this CPU
    (``host_math.HostRoutines``): ``decode(codes)`` and ``encode(values)``."""

    def __init__(self, name):
        from llvmlite import ir

        from host_math import HostRoutines
        from tilejit.codegen.lowering.scalar import _f8_to_f32, _f32_to_f8
        i8, f32 = ir.IntType(8), ir.FloatType()
        self.decode = functools.partial(HostRoutines(
            {"decode": lambda b, x: _f8_to_f32(b, name, x)}, i8, out_ty=f32), "decode")
        self.encode = functools.partial(HostRoutines(
            {"encode": lambda b, x: _f32_to_f8(b, name, x)}, f32, out_ty=i8), "encode")


@pytest.mark.parametrize("name", sorted(FP8))
def test_gpu_conversion_ir_matches_the_simulator(name):
    dtype, _, ml, largest = FP8[name]
    host = HostFloat8(name)
    codes = np.arange(256, dtype=np.uint8)
    want = numerics.from_float8_bits(codes, dtype)
    got = host.decode(codes)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))  # ±0 too
    # every float32 around the type's range, its halfway points and the specials
    rng = np.random.default_rng(0)
    finite = want[~nan & np.isfinite(want)]
    mids = (np.sort(finite)[1:] + np.sort(finite)[:-1]) / 2
    values = np.concatenate([
        finite, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
        rng.standard_normal(200_000).astype(np.float32) * rng.choice([1e-3, 1, 30, 1e3], 200_000),
        np.float32([np.inf, -np.inf, np.nan, largest * 2, -largest * 2, 1e-30, -1e-30, 0.0])])
    values = values.astype(np.float32)
    encoded = host.encode(values)
    got = numerics.from_float8_bits(encoded, dtype)
    want = numerics.cast(values, dtype)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.uint32) != want[~nan].view(np.uint32))
    assert bad.size == 0, (values[~nan][bad[:5]], got[~nan][bad[:5]], want[~nan][bad[:5]])


@tilejit.kernel
def scale_to(A, B, s):
    with T.Kernel(T.ceildiv(A.shape[0], 32), threads=128) as bx:
        for i, j in T.Parallel(32, A.shape[1]):
            B[bx * 32 + i, j] = T.cast(A[bx * 32 + i, j], T.float32) * s


@pytest.mark.parametrize("src,dst", [("float8_e4m3", "float16"), ("float16", "float8_e4m3"),
                                     ("float8_e5m2", "float8_e4m3"),
                                     ("float32", "float8_e5m2")])
def test_kernel_converts_in_simulation(src, dst):
    tt = {"float16": torch.float16, "float32": torch.float32,
          **{k: v[1] for k, v in FP8.items()}}
    a = (torch.randn(64, 48) * 40).to(tt[src])
    b = torch.empty(64, 48, dtype=tt[dst])
    scale_to(a, b, 3.0)
    ref = numerics.cast(a.float().numpy() * np.float32(3.0), as_dtype(dst))
    assert np.array_equal(b.float().numpy(), np.asarray(ref, np.float32))


def test_numpy_float8_arrays_in_simulation():
    a = (np.random.default_rng(1).standard_normal((32, 16)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = np.zeros((32, 16), ml_dtypes.float8_e5m2)
    scale_to(a, b, 0.5)
    want = numerics.cast(a.astype(np.float32) * np.float32(0.5), T.float8_e5m2)
    assert np.array_equal(b.astype(np.float32), want)


@pytest.mark.gpu
@pytest.mark.parametrize("src,dst", [("float8_e4m3", "float16"), ("float32", "float8_e4m3"),
                                     ("float8_e5m2", "float8_e4m3")])
def test_kernel_converts_on_gpu(src, dst):
    tt = {"float16": torch.float16, "float32": torch.float32,
          **{k: v[1] for k, v in FP8.items()}}
    x = torch.randn(256, 96) * 100
    x[0, :4] = torch.tensor([float("inf"), -float("inf"), 1e6, float("nan")])
    a = x.to(tt[src]) if src not in FP8 else torch.from_numpy(
        numerics.cast(x.numpy(), as_dtype(src))).to(tt[src])
    b = torch.empty(256, 96, dtype=tt[dst], device="cuda")
    scale_to(a.cuda(), b, 3.0)
    b_sim = torch.empty(256, 96, dtype=tt[dst])
    tilejit.kernel(scale_to.func, target="sim")(a, b_sim, 3.0)
    assert torch.equal(b.cpu().float().nan_to_num(7.0), b_sim.float().nan_to_num(7.0))


def test_tilelangs_float8_e4m3fn_is_a_str_of_torchs_name_and_a_t_empty_output():
    """TileLang's `getattr(torch, T.float8_e4m3fn)` and `T.empty(..., T.float8_e4m3fn)`
    on torch tensors (TileLang's per-token fp8 cast example)."""
    torch = pytest.importorskip("torch")
    import tilejit as tilelang
    assert T.float8_e4m3fn == "float8_e4m3fn"
    assert getattr(torch, T.float8_e4m3fn) is torch.float8_e4m3fn
    assert T.float8_e4m3fn.as_torch() is torch.float8_e4m3fn
    spelled = T.dtype(T.float8_e4m3fn)
    assert spelled is T.float8_e4m3fn and spelled == T.float8_e4m3
    assert {"float8_e4m3fn": 1}[T.float8_e4m3fn] == 1

    @tilelang.jit
    def to_fp8(X, blk_m=16):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        Y = T.empty((M, N), T.float8_e4m3fn)
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as row:
            y = T.alloc_fragment((blk_m, N), T.float32)
            y8 = T.alloc_fragment((blk_m, N), T.float8_e4m3fn)
            T.copy(X[row * blk_m, 0], y)
            for i, j in T.Parallel(blk_m, N):
                y[i, j] = T.clamp(y[i, j], -448.0, 448.0)
            T.copy(y, y8)
            T.copy(y8, Y[row * blk_m, 0])
        return Y

    x = torch.randn(32, 64) * 100
    y = to_fp8(x)
    assert y.dtype == torch.float8_e4m3fn
    assert torch.equal(y.float(), x.clamp(-448, 448).to(torch.float8_e4m3fn).float())


def _e4m3fn_scalars(form, M=16, N=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float8_e4m3fn)):
        with T.Kernel(1, threads=128):
            if form == "var":
                v = T.alloc_var(T.float8_e4m3fn)
                for i in T.serial(M):
                    for j in T.serial(N):
                        v = X[i, j]
                        Q[i, j] = v
            elif form == "astype":
                for i, j in T.Parallel(M, N):
                    Q[i, j] = X[i, j].astype(T.float8_e4m3fn)
            elif form == "Cast":
                for i, j in T.Parallel(M, N):
                    Q[i, j] = T.Cast(T.float8_e4m3fn, X[i, j])
            else:
                for i, j in T.Parallel(M, N):
                    Q[i, j] = T.max(X[i, j], T.float8_e4m3fn(-2.0))
    return main


@pytest.mark.parametrize("form", ["var", "astype", "Cast", "constant"])
def test_tilelangs_float8_e4m3fn_spelling_in_scalar_uses(form, ptxas):
    """`T.float8_e4m3fn` (TileLang's name, torch's) where a scalar needs a dtype: the same
    dtype as float8_e4m3 (it was "no value in a kernel has this dtype", and an internal
    KeyError for `T.float8_e4m3fn(-2.0)`; found by a user-style fuzz)."""
    import torch
    import tilejit as tilelang
    x = torch.randn(16, 16) * 10
    q = tilelang.compile(_e4m3fn_scalars(form), out_idx=[1])(x)
    want = (x.clamp_min(-2) if form == "constant" else x).to(torch.float8_e4m3fn)
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    ptxas(tilelang.compile(_e4m3fn_scalars(form),
                           target="cuda -arch=sm_90a").get_kernel_source(), "sm_90a")

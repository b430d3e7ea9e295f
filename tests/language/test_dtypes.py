"""Dtypes as TileLang's users use them: a dtype is its name as a str (``"float16" ==
T.float16``, ``getattr(torch, T.float16)``, dicts keyed by names, names in parametrize),
with ``bits``, ``itemsize`` and ``as_torch()``; and still one compile-time value to the
compiler."""
import pickle

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language.dtypes import ALL_DTYPES, as_dtype


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_a_dtype_is_its_name(dtype):
    assert dtype == dtype.name and isinstance(dtype, str) and str(dtype) == dtype.name
    assert hash(dtype) == hash(dtype.name) and {dtype.name: 1}[dtype] == 1
    assert as_dtype(dtype.name) is dtype and as_dtype(dtype) is dtype
    assert pickle.loads(pickle.dumps(dtype)) is dtype
    assert repr(dtype) == f"T.{dtype.name}"


@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16, T.float32, T.int8, T.int32])
def test_torch_takes_a_dtype_by_name(dtype):
    assert getattr(torch, dtype) is dtype.as_torch()
    assert torch.empty(2, dtype=getattr(torch, dtype)).dtype == dtype.as_torch()
    assert dtype.bits == torch.empty(0, dtype=dtype.as_torch()).element_size() * 8


def test_dtypes_are_immutable():
    with pytest.raises(AttributeError, match="immutable"):
        T.float16.bits = 32


@pytest.mark.parametrize("in_dtype, accum", [("float16", "float32"), (T.float16, T.float32)])
def test_a_kernel_takes_dtype_names_or_objects_alike(in_dtype, accum):
    @tilejit.kernel
    def scale(A, B, dtype: T.constexpr = "float32"):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((32,), dtype)
            T.copy(A[0:32], F)
            for i in T.Parallel(32):
                F[i] = F[i] * 2.0
            T.copy(F, B[0:32])
    a = np.arange(32, dtype=np.float16)
    b = np.zeros(32, np.float16)
    scale(a, b, dtype=accum)
    np.testing.assert_array_equal(b, a * 2)
    table = {"float16": "half", "float32": "float"}
    assert table[in_dtype] == "half" and table[accum] == "float"


def _select_with(dt, form):
    @T.prim_func
    def main(A: T.Tensor((16, 16), dt), B: T.Tensor((16, 16), dt)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 16), dt)
            for i, j in T.Parallel(16, 16):
                if form == 0:
                    S[i, j] = T.if_then_else(j < 5, A[i, j], 0)
                elif form == 1:
                    S[i, j] = T.if_then_else(j < 5, A[i, j], -T.infinity(T.float32))
                else:
                    S[i, j] = T.if_then_else(j < 5, A[i, j], T.float16(0))
            T.copy(S, B)
    return main


@pytest.mark.parametrize("dt", ["bfloat16", "float8_e4m3"])
@pytest.mark.parametrize("form", [0, 1, 2])
def test_a_select_of_a_bfloat16_or_float8_and_another_type(dt, form, ptxas):
    """`T.if_then_else(mask, x, 0)` on a bfloat16 (or float8) x, the masking idiom: the
    branches unify (a literal takes x's type, a float the wider); it was an internal
    error ("bfloat16 cannot be represented as a NumPy dtype"), found by a user-style
    fuzz."""
    import torch
    import tilejit as tilelang
    tdt = {"bfloat16": torch.bfloat16, "float8_e4m3": torch.float8_e4m3fn}[dt]
    a = torch.randn(16, 16).to(tdt)
    b = tilelang.compile(_select_with(dt, form), out_idx=[1])(a)
    want = a.float().clone()
    want[:, 5:] = float("-inf") if form == 1 else 0.0
    torch.testing.assert_close(b.float(), want.to(tdt).float(), rtol=0, atol=0,
                               equal_nan=True)
    ptxas(tilelang.compile(_select_with(dt, form),
                           target="cuda -arch=sm_90a").get_kernel_source(), "sm_90a")


def test_float8_e4m3fn_is_float8_e4m3_by_either_spelling():
    """TileLang's (torch's) spelling float8_e4m3fn names tilejit's float8_e4m3: equal by
    either name, ``T.dtype(torch.float8_e4m3fn)`` keeps torch's so ``getattr(torch, d)``
    finds it, a tensor annotated so compares equal to either in a program."""
    import torch
    d = T.dtype(torch.float8_e4m3fn)
    assert all(d == x and x == d and T.float8_e4m3 == x
               for x in (T.float8_e4m3fn, T.float8_e4m3, "float8_e4m3fn", "float8_e4m3"))
    assert not (d != T.float8_e4m3) and T.float8_e4m3 != T.float8_e5m2
    assert getattr(torch, d) is torch.float8_e4m3fn and T.dtype("float8_e4m3fn") is d
    assert {"float8_e4m3fn": 1}[d] == 1 and {"float16": 2}[T.float16] == 2
    assert tilejit.language.dtypes.as_dtype(d) is T.float8_e4m3

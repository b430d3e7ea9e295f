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

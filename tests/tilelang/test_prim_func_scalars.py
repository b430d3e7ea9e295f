"""Scalar parameters of a ``@T.prim_func`` (``l: T.int32``), as TileLang's programs
declare them: passed at each call, checked for their kind, usable in the body; refused as
outputs; the PTX assembles."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def window(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), lo: T.int32, hi: T.int32, scale: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                if k < N:
                    A[k] = T.if_then_else(lo <= k and k < hi, k * scale, 0.0)
    return main


def test_scalars_are_passed_at_each_call():
    kernel = tilelang.compile(window(1000))
    a = torch.full((1000,), -1.0)
    kernel(a, 10, 500, 0.5)
    ref = torch.where((torch.arange(1000) >= 10) & (torch.arange(1000) < 500),
                      torch.arange(1000) * 0.5, torch.zeros(1000))
    torch.testing.assert_close(a, ref.float())
    kernel(a, np.int32(0), 3, 2)                     # numpy ints; an int for a float
    assert a[:4].tolist() == [0.0, 2.0, 4.0, 0.0]


def test_a_scalar_of_the_wrong_kind_names_the_parameter():
    kernel = tilelang.compile(window(64))
    with pytest.raises(TypeError, match="'lo': expected a int32 scalar, got float"):
        kernel(torch.zeros(64), 1.5, 3, 1.0)
    with pytest.raises(TypeError, match="'hi'"):
        kernel(torch.zeros(64), 1, torch.zeros(1), 1.0)


def test_a_scalar_cannot_be_an_output():
    with pytest.raises(ValueError, match="scalar"):
        tilelang.compile(window(64), out_idx=[1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = tilelang.compile(window(1000)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)


def test_an_annotation_that_is_neither_is_still_refused():
    with pytest.raises(TypeError, match="T.Tensor/T.Buffer annotation or a scalar dtype"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.float32), n: int):
            pass

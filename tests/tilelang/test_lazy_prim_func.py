"""TileLang's "lazy" ``@T.prim_func``: parameters annotated in the body, outputs made
with ``T.empty`` and returned; ``tilelang.compile`` (or a ``@tilelang.jit`` factory)
compiles it as the eager program it reads like."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T


def add_one():
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[128, 128], T.float32]
        B = T.empty([128, 128], T.float32)
        with T.Kernel(1):
            for i in T.serial(128):
                for j in T.serial(128):
                    B[i, j] = A[i, j] + 1.0
        return B
    return kernel


def written_outputs():
    @T.prim_func
    def kernel(A, B, C):
        m = T.dynamic("m")
        A: T.Tensor[[m], T.float32]
        B: T.Tensor[[m * 2 + 1], T.float32]
        C: T.Tensor[[m + 1], T.float32]
        with T.Kernel(1, threads=1):
            for i in T.serial(m * 2 + 1):
                B[i] = A[i % m] + 1.0
            for i in T.serial(m + 1):
                C[i] = T.cast(i, T.float32)
    return kernel


def test_a_lazy_prim_func_returns_its_outputs():
    a = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    compiled = tilelang.compile(add_one(), target="sim")
    np.testing.assert_array_equal(compiled(a), a + np.float32(1.0))


def test_a_lazy_prim_func_with_symbols_writes_its_arguments():
    a = np.arange(5, dtype=np.float32)
    b, c = np.zeros(11, np.float32), np.zeros(6, np.float32)
    tilelang.compile(written_outputs(), target="sim")(a, b, c)
    np.testing.assert_array_equal(b, np.tile(a, 3)[:11] + 1.0)
    np.testing.assert_array_equal(c, np.arange(6, dtype=np.float32))


@tilelang.jit(target="sim")
def scaled(factor=2.0):
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[64], T.float32]
        B = T.empty([64], T.float32)
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] * factor
        return B
    return kernel


def test_a_lazy_prim_func_from_a_jit_factory():
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(scaled(3.0)(a), a * 3.0)


def test_out_idx_for_a_program_that_returns_its_outputs_is_a_conflict():
    with pytest.raises(ValueError, match="Out index conflict: @T.prim_func kernel returns its "
                                         "outputs"):
        tilelang.compile(add_one(), out_idx=[-1])


def test_a_parameter_annotated_nowhere_is_still_named():
    with pytest.raises(TypeError, match="parameter 'B' needs a T.Tensor/T.Buffer annotation, "
                                        "in the body as 'A' has"):
        @T.prim_func
        def kernel(A, B):
            A: T.Tensor[[4], T.float32]
            with T.Kernel(1):
                B[0] = A[0]


def scalar_parameter():
    @T.prim_func
    def kernel(A, n):
        A: T.Tensor[[64], T.float32]
        n: T.int32
        B = T.empty([64], T.float32)
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] + n
        return B
    return kernel


def test_a_scalar_annotated_in_the_body():
    a = np.ones(64, np.float32)
    np.testing.assert_array_equal(tilelang.compile(scalar_parameter(), target="sim")(a, 3),
                                  a + 3)


def test_out_idx_for_a_lazy_prim_func_that_writes_its_parameters():
    """The parameters out_idx names are allocated and returned (tilelang/output_params.py;
    more in test_function_attrs.py)."""
    a = np.arange(5, dtype=np.float32)
    b, c = tilelang.compile(written_outputs(), out_idx=[1, 2])(a)
    np.testing.assert_array_equal(c, np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(b, np.tile(a, 3)[:11] + 1)


def macro_inside():
    @T.prim_func
    def kernel(A, B):
        A: T.Tensor[[32], T.float32]
        B: T.Tensor[[32], T.float32]

        @T.macro
        def twice(x):
            return x * 2.0
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = twice(A[i])
    return kernel


def test_a_return_in_a_function_of_the_body_is_not_the_programs():
    """out_idx names an output, not an "Out index conflict" because a macro defined in
    the body returns a value."""
    a = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(tilelang.compile(macro_inside(), out_idx=[1])(a), a * 2)


@pytest.mark.gpu
def test_a_lazy_prim_func_on_the_gpu():
    import torch
    a = torch.randn(128, 128, device="cuda")
    out = tilelang.compile(add_one())(a)
    torch.testing.assert_close(out, a + 1.0, rtol=0, atol=0)
    b = torch.zeros(11, device="cuda")
    c = torch.zeros(6, device="cuda")
    tilelang.compile(written_outputs())(torch.arange(5.0, device="cuda"), b, c)
    torch.testing.assert_close(c, torch.arange(6.0, device="cuda"))
    torch.testing.assert_close(b, torch.arange(5.0, device="cuda").repeat(3)[:11] + 1.0)

"""Integer arithmetic on shape symbols, as TileLang programs write it around a
``@T.prim_func``: ``T.ceildiv(M, block_M)`` in the grid where ``M = T.dynamic("m")``
(TileLang's test_tilelang_jit_gemm_cython.py::test_cython_dynamic_shape), ``m // 2`` or
``T.ceildiv(m, 4)`` as an annotation extent, a grid size computed outside the body. One
compiled kernel serves every size; what cannot be supported is a TypeError or
CompileError naming the symbol."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def _check_matmul(kernel, m, n, k, dtype, device="cpu"):
    tdtype = T.dtype(dtype).as_torch()
    a = torch.randn(m, k, dtype=tdtype, device=device)
    b = torch.randn(k, n, dtype=tdtype, device=device)
    c = kernel(a, b)
    ref = (a.double() @ b.double()).float()
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=2e-2)
    return c


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dynamic", ["m", "mnk"])
def test_a_grid_of_ceildiv_over_dynamic_symbols(dtype, dynamic):
    M = T.dynamic("m")
    N, K = (T.dynamic("n"), T.dynamic("k")) if dynamic == "mnk" else (64, 64)
    kernel = tilelang.compile(matmul(M, N, K, 32, 32, 32, dtype), out_idx=-1)
    for m in (32, 96):          # one kernel, several sizes
        _check_matmul(kernel, m, 64, 64, dtype)
    if dynamic == "mnk":
        _check_matmul(kernel, 64, 32, 96, dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_computed_extents_and_closure_values(dtype):
    m = T.dynamic("m")
    half, blocks = m // 2, T.ceildiv(m, 32)

    @T.prim_func
    def pair_sums(A: T.Tensor((m,), dtype), S: T.Tensor((half,), dtype),
                  R: T.Tensor((m % 4 + 1,), dtype)):
        with T.Kernel(blocks, threads=32) as bx:
            for i in T.Parallel(32):
                j = bx * 32 + i
                if j < half:
                    S[j] = A[2 * j] + A[2 * j + 1]
                if j < m % 4 + 1:
                    R[j] = A[j]

    kernel = tilelang.compile(pair_sums, out_idx=[1, 2])
    for size in (10, 64, 71):
        a = np.arange(size).astype(dtype)
        s, r = kernel(a)
        assert s.shape == (size // 2,) and r.shape == (size % 4 + 1,)
        np.testing.assert_array_equal(s, a[0:2 * (size // 2):2] + a[1:2 * (size // 2):2])
        np.testing.assert_array_equal(r, a[:size % 4 + 1])
    with pytest.raises(ValueError, match=r"argument 'S': shape\[0\] must be m // 2 = 5, got 4"):
        kernel(np.zeros(10, dtype), np.zeros(4, dtype), np.zeros(3, dtype))


@pytest.mark.parametrize("expr,value", [
    (lambda m, n: m + 1, 301), (lambda m, n: 3 - m, -297), (lambda m, n: m * 4, 1200),
    (lambda m, n: m // 7, 42), (lambda m, n: m % 7, 6), (lambda m, n: n * m, 2100),
    (lambda m, n: T.ceildiv(m, 128), 3), (lambda m, n: -m + 2 * n, -286),
    (lambda m, n: (m - 1) // n * n, 294), (lambda m, n: m >= 300, True),
])
def test_an_expression_evaluates_as_python_would(expr, value):
    e = expr(T.dynamic("m"), T.dynamic("n"))
    assert isinstance(e, T.Var.__mro__[1])      # a symbolic integer, not a number
    assert e.evaluate({"m": 300, "n": 7}) == value


def test_what_python_cannot_do_with_a_symbol_names_it():
    m = T.dynamic("m")
    with pytest.raises(TypeError, match="shape symbol m: m / 2 is not an integer"):
        m / 2
    with pytest.raises(TypeError, match="shape symbol m: whether m < 128 holds is known only"):
        if m < 128:
            pass
    with pytest.raises(TypeError, match="shape symbol m: .* cannot be used as a Python int"):
        range(T.ceildiv(m, 4))
    with pytest.raises(TypeError, match=r"shape symbol m: m \+ 1.5 is not supported"):
        m + 1.5


def test_a_symbol_no_extent_gives_is_a_compile_error():
    m = T.dynamic("m")
    half = m // 2

    @T.prim_func
    def only_half(A: T.Tensor((half,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(half):
                A[i] = 1.0

    with pytest.raises(CompileError, match=r"symbol m .* \(in half = m // 2\) but is not an "
                                           r"extent of any parameter"):
        tilelang.compile(only_half)


def test_one_call_declares_several_symbols():
    # flash-linear-attention's TileLang kernels write `B, Tt = T.dynamic("B, Tt")` around
    # their prim_func; TileLang splits the names at commas, else at spaces
    m, n, k = T.dynamic("m, n, k")
    assert (m.name, n.name, k.name) == ("m", "n", "k") and m.dynamic and k.dynamic
    p, q = T.dynamic("p q")
    assert (p.name, q.name) == ("p", "q")
    assert isinstance(T.dynamic("m"), T.Var)
    kernel = tilelang.compile(matmul(m, n, k, 32, 32, 32), out_idx=-1)
    for shape in ((32, 64, 96), (96, 32, 64)):
        _check_matmul(kernel, *shape, "float16")
    with pytest.raises(ValueError, match=r"T.dynamic\(name\): expected one name or names "
                                         r"separated by commas .*got 'm, 2n'"):
        T.dynamic("m, 2n")
    with pytest.raises(TypeError, match="T.const\\(name\\): the name must be a str .*got int 3"):
        T.const(3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_a_grid_of_ceildiv_over_dynamic_symbols(dtype):
    kernel = tilelang.compile(matmul(T.dynamic("m"), T.dynamic("n"), T.dynamic("k"),
                                     64, 64, 32, dtype), out_idx=-1)
    tdtype = T.dtype(dtype).as_torch()
    for m, n, k in ((256, 256, 192), (128, 192, 64)):
        a = torch.randn(m, k, dtype=tdtype)
        b = torch.randn(k, n, dtype=tdtype)
        on_gpu = kernel(a.cuda(), b.cuda()).cpu()
        in_sim = kernel(a, b)
        ref = (a.double() @ b.double()).float()
        torch.testing.assert_close(on_gpu.float(), ref, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(on_gpu.float(), in_sim.float(), rtol=1e-2, atol=1e-2)

"""TileLang's front door: the seeds' eager-style programs with only the imports
changed (`import tilejit as tilelang`, `import tilejit.language as T`)."""
import warnings

import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


# seed 000, chapter 2, as written
@tilelang.jit
def vector_add(A, B, block_M: int = 128):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    B: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.float32)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as (bx,):
        for i in T.Parallel(block_M):
            C[bx * block_M + i] = A[bx * block_M + i] + B[bx * block_M + i]

    return C


# seed 002, chapter 7, as written
@tilelang.jit
def tilelang_vector_add(
    A,
    B,
    block_size: int = 256,
):
    N = T.const("N")

    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)

    C = T.empty((N,), T.float32)

    with T.Kernel(
        T.ceildiv(N, block_size),
        threads=block_size,
    ) as block_id:
        for thread_id in T.Parallel(block_size):
            index = (
                block_id * block_size
                + thread_id
            )

            if index < N:
                C[index] = A[index] + B[index]

    return C


@tilelang.jit
def scale_rows(X, block_N, dtype="float16"):
    M, N = T.const("M, N")
    X: T.Tensor[[M, N], dtype]
    Y = T.empty((M, N), dtype)
    with T.Kernel(M, threads=128) as row:
        for j in T.Parallel(block_N):
            if j < N:
                Y[row, j] = T.Cast(dtype, X[row, j] * T.cast(row + 1, T.float32))
    return Y


@tilelang.jit
def dynamic_copy(A, block=256):
    n = T.dynamic("n")
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
        for i in T.Parallel(block):
            k = bx * block + i
            if k < n:
                B[k] = A[k]
    return B


def test_seed_vector_add_runs_as_written():
    a, b = torch.randn(1024), torch.randn(1024)
    torch.testing.assert_close(vector_add(a, b), a + b)


def test_seed_vector_add_chapter_7():
    a = torch.randn(1 << 16)
    b = torch.randn_like(a)
    torch.testing.assert_close(tilelang_vector_add(a, b), a + b)
    torch.testing.assert_close(tilelang_vector_add(a[:1000], b[:1000]), a[:1000] + b[:1000])


def test_compile_with_symbol_sizes_gives_ptx():
    kernel = vector_add.compile(M=1024)
    src = kernel.get_kernel_source()
    assert ".entry vector_add_kernel" in src
    a, b = torch.randn(1024), torch.randn(1024)
    torch.testing.assert_close(kernel(a, b), a + b)


def test_compile_needs_every_symbol():
    with pytest.raises(TypeError, match="give the size of symbol"):
        vector_add.compile()


def test_bracket_annotations_dtype_parameter_and_cast():
    x = torch.randn(5, 40).half()
    y = scale_rows(x, 64)
    ref = (x.float() * torch.arange(1, 6).float()[:, None]).half()
    torch.testing.assert_close(y, ref)
    xb = torch.randn(3, 10).to(torch.bfloat16)
    yb = scale_rows(xb, 64, dtype="bfloat16")
    torch.testing.assert_close(yb, (xb.float() * torch.arange(1, 4).float()[:, None])
                               .to(torch.bfloat16))


def test_symbol_bound_to_two_sizes_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"symbol M: A has 8 but B.shape\[0\] is 9"):
        vector_add(torch.randn(8), torch.randn(9))


def test_annotated_dtype_is_checked():
    with pytest.raises(TypeError, match="expected dtype float32"):
        vector_add(torch.randn(8).double(), torch.randn(8).double())


def test_dynamic_symbol_stays_runtime():
    a = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(dynamic_copy(a), a)
    assert dynamic_copy.kernel.shape_entries == ()


def test_dynamic_symbol_as_tile_extent_is_an_error():
    with pytest.raises(tilelang.CompileError, match="T.dynamic"):
        @tilelang.jit
        def bad(A):
            n = T.dynamic("n")
            A: T.Tensor((n,), T.float32)
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(n):
                    A[i] = bx


def test_pass_configs_accepted_and_unknown_warns_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            @tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ENABLE_DUMP_IR: False,
                                        "tl.no_such_thing": True}, out_idx=[-1])
            def k(A):
                n = T.const("n")
                A: T.Tensor((n,), T.float32)
                with T.Kernel(1, threads=32) as bx:
                    A[bx] = 1.0
    assert sum("tl.no_such_thing" in str(w.message) for w in caught) == 1


@pytest.mark.gpu
def test_seed_programs_on_gpu():
    a = torch.randn(1 << 20, device="cuda")
    b = torch.randn_like(a)
    torch.testing.assert_close(vector_add(a, b), a + b)
    torch.testing.assert_close(tilelang_vector_add(a, b), a + b)
    x = torch.randn(7, 50, device="cuda").half()
    y = scale_rows(x, 64)
    torch.testing.assert_close(y.cpu(), scale_rows(x.cpu(), 64))


# the classic style (seed 004's shape, on an elementwise body)
M_, N_ = 64, 96


@T.prim_func
def saxpy_kernel(
    X: T.Buffer((M_, N_), "float32"),
    Y: T.Buffer((M_, N_), "float32"),
    Z: T.Buffer((M_, N_), "float32"),
):
    with T.Kernel(T.ceildiv(N_, 32), M_, threads=32) as (bx, by):
        for j in T.Parallel(32):
            Z[by, bx * 32 + j] = 2.0 * X[by, bx * 32 + j] + Y[by, bx * 32 + j]


@tilelang.jit(out_idx=[-1])
def scaled_copy(M, N, scale, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=64) as row:
            for j in T.Parallel(N):
                B[row, j] = A[row, j] * scale
    return main


def test_classic_compile_and_call_with_all_tensors():
    kernel = tilelang.compile(saxpy_kernel, target="cuda")
    x, y = torch.randn(M_, N_), torch.randn(M_, N_)
    z = torch.empty(M_, N_)
    kernel(x, y, z)
    torch.testing.assert_close(z, 2 * x + y)
    assert ".entry saxpy_kernel_kernel" in kernel.get_kernel_source()


def test_classic_factory_with_out_idx():
    kernel = scaled_copy(16, 64, 0.5)
    a = torch.randn(16, 64).half()
    b = kernel(a)
    torch.testing.assert_close(b, a * 0.5)
    assert scaled_copy(16, 64, 0.5) is kernel          # cached per arguments
    with pytest.raises(ValueError, match=r"shape\[1\] must be 64"):
        kernel(torch.randn(16, 32).half())
    with pytest.raises(TypeError, match="expected dtype float16"):
        kernel(torch.randn(16, 64))


@pytest.mark.gpu
def test_classic_on_gpu():
    kernel = scaled_copy(128, 256, 3.0)
    a = torch.randn(128, 256, device="cuda").half()
    b = kernel(a)
    assert b.is_cuda
    torch.testing.assert_close(b, a * 3.0)
    k2 = tilelang.compile(saxpy_kernel, target="cuda")
    x, y = torch.randn(M_, N_, device="cuda"), torch.randn(M_, N_, device="cuda")
    z = torch.empty_like(x)
    k2(x, y, z)
    torch.testing.assert_close(z, 2 * x + y)

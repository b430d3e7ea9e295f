"""Helpers (``@T.macro`` or plain) defined in the kernel's own body
(frontend/local_helpers.py): a scalar macro called in an expression (a device function),
a macro of tile operations called as a statement (inlined), one reading the kernel's own
names (inlined, as Python's closure), and the error where such a one is called in an
expression. In simulation against torch, PTX assembled by ptxas, with ``-m gpu`` against
the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def lazy_twice():
    @T.prim_func
    def kernel(A, B):
        A: T.Tensor[[128], T.float32]
        B: T.Tensor[[128], T.float32]

        @T.macro
        def twice(x):
            return x * 2.0

        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = twice(A[i])
    return kernel


def tile_macro():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        @T.macro
        def load_scaled(src, dst, s):
            T.copy(src, dst)
            for i, j in T.Parallel(64, 64):
                dst[i, j] = dst[i, j] * s

        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((64, 64), "float32")
            load_scaled(A, frag, 3.0)
            T.copy(frag, B)
    return main


def closure_macro():
    @tilelang.jit
    def add_rows(A):
        M, N = T.const("M N")
        A: T.Tensor[[M, N], T.float32]
        B = T.empty([M, N], T.float32)

        @T.macro
        def row(i):
            for j in T.serial(N):
                B[i, j] = A[i, j] + 1.0

        with T.Kernel(1, threads=1):
            for i in T.serial(M):
                row(i)
        return B
    return add_rows


def test_scalar_macro_of_the_body(ptxas):
    a = torch.randn(128)
    kernel = tilelang.compile(lazy_twice(), out_idx=[1])
    torch.testing.assert_close(kernel(a), a * 2)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.compile(A=T.Tensor[[128], T.float32], arch=arch).get_kernel_source(),
              arch)


def test_tile_macro_of_the_body(ptxas):
    a = torch.randn(64, 64)
    kernel = tilelang.compile(tile_macro(), out_idx=[1])
    torch.testing.assert_close(kernel(a), a * 3)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_macro_reading_the_kernels_names_is_inlined():
    a = torch.randn(4, 8)
    torch.testing.assert_close(closure_macro()(a), a + 1)


def test_macro_reading_the_kernels_names_in_an_expression():
    @tilelang.jit
    def plus(A):
        M = T.const("M")
        A: T.Tensor[[M], T.float32]
        B = T.empty([M], T.float32)

        @T.macro
        def plus_m(x):
            return x + M

        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                B[i] = plus_m(A[i])
        return B
    with pytest.raises(tilelang.CompileError, match=r"plus_m\(\), defined in the kernel, "
                       r"reads M of the kernel: called in an expression"):
        plus(torch.zeros(32))


def test_a_decorator_that_fails_is_reported_at_the_def():
    def broken(f):
        raise RuntimeError("no")

    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        @broken
        def helper(x):
            return x

        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = helper(A[i])
    with pytest.raises(tilelang.CompileError, match=r"defining helper\(\) in the kernel: "
                       r"RuntimeError: no"):
        tilelang.compile(main)(torch.zeros(32))


@pytest.mark.gpu
def test_gpu_matches_the_simulator():
    a = torch.randn(128)
    kernel = tilelang.compile(lazy_twice(), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))
    b = torch.randn(64, 64)
    tile = tilelang.compile(tile_macro(), out_idx=[1])
    torch.testing.assert_close(tile(b.cuda()).cpu(), tile(b))
    c = torch.randn(4, 8)
    rows = closure_macro()
    torch.testing.assert_close(rows(c.cuda()).cpu(), rows(c))

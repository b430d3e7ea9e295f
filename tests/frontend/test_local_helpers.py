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
                B[i] = plus_m(A[i]) * 2     # (`B[i] = plus_m(A[i])` is inlined)
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


N = 1000            # a module global the kernels below shadow with names of their own


def test_a_kernel_name_shadowing_a_global_is_the_kernels():
    """Python's closure: the helper reads the kernel's N, not the module's; called in an
    expression (a device function, which reads globals) that is an error, not the
    global's value."""
    @tilelang.jit
    def shifted(A):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty([N], T.float32)

        @T.macro
        def plus_n(x):
            return x + N

        with T.Kernel(1, threads=16):
            for i in T.Parallel(N):
                v = plus_n(A[i])          # an assignment: inlined
                B[i] = v
        return B
    torch.testing.assert_close(shifted(torch.zeros(16)), torch.full((16,), 16.0))

    @tilelang.jit
    def in_expression(A):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty([N], T.float32)

        @T.macro
        def plus_n(x):
            return x + N

        with T.Kernel(1, threads=16):
            for i in T.Parallel(N):
                B[i] = plus_n(A[i]) * 2
        return B
    with pytest.raises(tilelang.CompileError, match=r"plus_n\(\), defined in the kernel, "
                       r"reads N of the kernel"):
        in_expression(torch.zeros(16))


def test_a_default_reading_the_kernels_name_is_refused():
    @tilelang.jit
    def scaled(A):
        s = 4.0
        A: T.Tensor[[16], T.float32]
        B = T.empty([16], T.float32)

        def mul(x, k=s):
            return x * k

        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = mul(A[i])
        return B
    with pytest.raises(tilelang.CompileError, match=r"mul\(\), defined in the kernel: its "
                       r"defaults or decorators read s of the kernel"):
        scaled(torch.zeros(16))


def test_a_helper_calls_one_defined_after_it():
    @tilelang.jit
    def chained(A):
        A: T.Tensor[[16], T.float32]
        B = T.empty([16], T.float32)

        def outer(x):
            return inner(x) + 1.0

        def inner(x):
            return x * 2.0

        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = outer(A[i])
        return B
    a = torch.randn(16)
    torch.testing.assert_close(chained(a), a * 2 + 1)


@T.macro
def total(frag):
    s = T.alloc_fragment((1,), "float32")
    T.reduce_sum(frag, s, dim=0)
    return s


def fragment_returned():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            s = total(f)                # the macro's tile, named s here
            B[0] = s[0]
    return main


def test_a_macro_returning_the_tile_it_made(ptxas):
    a = torch.randn(64)
    kernel = tilelang.compile(fragment_returned(), out_idx=[1])
    torch.testing.assert_close(kernel(a), a.double().sum().float().reshape(1))
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
def test_gpu_macro_returning_the_tile_it_made():
    a = torch.randn(64)
    kernel = tilelang.compile(fragment_returned(), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a), rtol=1e-5, atol=1e-5)

"""Eager-style ``@tilelang.jit`` programs whose size symbols are made outside the jitted
function (at module level, or in an enclosing function, as sglang's fp8_paged_mqa_logits
writes them): each takes its value from the tensor extent it annotates, as a symbol
declared in the body does. And names the body binds under an ``if`` before the
annotation that reads them (``if n < 0: n = 8``)."""
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError

torch = pytest.importorskip("torch")

N = T.dynamic("N")
R = T.const("R")
C = T.const("C")


# the reproducer's program: a module-level T.dynamic sizes the grid
@tilelang.jit
def double_rows(A: T.Tensor[(N, 4), T.float32], O: T.Tensor[(N, 4), T.float32]) -> None:
    with T.Kernel(N, threads=128) as bxs:
        bx = bxs % N
        if bxs // N == 0:
            for j in T.serial(4):
                O[bx, j] = A[bx, j] * 2


@tilelang.jit
def add_one(A, O, block: int = 64):
    A: T.Tensor[(N,), T.float32]
    O: T.Tensor[(N,), T.float32]
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                O[bx * block + i] = A[bx * block + i] + 1


# a module-level T.const: a tile extent (C) specializes the kernel, the grid's (R) not
@tilelang.jit
def row_scale(A, O, scale: float = 3.0):
    A: T.Tensor[(R, C), T.float32]
    O: T.Tensor[(R, C), T.float32]
    with T.Kernel(R, threads=32) as bx:
        for j in T.Parallel(C):
            O[bx, j] = A[bx, j] * scale


@tilelang.jit
def row_scale_in_body(A, O, scale: float = 3.0):
    R, C = T.const("R, C")
    A: T.Tensor[(R, C), T.float32]
    O: T.Tensor[(R, C), T.float32]
    with T.Kernel(R, threads=32) as bx:
        for j in T.Parallel(C):
            O[bx, j] = A[bx, j] * scale


def split_kernel(split: int, factor: float):
    """sglang's fp8_paged_mqa_logits_kernel's shape: symbols of the enclosing function."""
    rows = T.dynamic("batch_size")
    width = 4

    @tilelang.jit
    def scaled(A: T.Tensor[(rows, width), T.float32],
               O: T.Tensor[(rows, width), T.float32]) -> None:
        _ = rows, width
        with T.Kernel(rows * split) as bxs:
            bx = bxs % rows
            if bxs // rows == 0:
                for j in T.serial(width):
                    O[bx, j] = A[bx, j] * factor

    return scaled


def test_module_level_dynamic_symbol_sizes_the_grid():
    for n in (3, 17, 40):
        a = torch.randn(n, 4)
        o = torch.zeros(n, 4)
        double_rows(a, o)
        torch.testing.assert_close(o, a * 2)
    assert len(double_rows.kernel._cache) == 1          # a run-time value: one kernel
    for n in (5, 64, 130):
        a = torch.randn(n)
        o = torch.zeros(n)
        add_one(a, o)
        torch.testing.assert_close(o, a + 1)
    assert len(add_one.kernel._cache) == 1


def test_module_level_dynamic_symbol_is_one_size():
    with pytest.raises(ValueError, match="O"):
        double_rows(torch.randn(3, 4), torch.zeros(5, 4))


def test_module_level_const_symbol_as_a_declared_one():
    for rows, cols in ((2, 32), (5, 32), (3, 64)):
        a = torch.randn(rows, cols)
        o, o_body = torch.zeros(rows, cols), torch.zeros(rows, cols)
        row_scale(a, o)
        row_scale_in_body(a, o_body)
        torch.testing.assert_close(o, a * 3.0)
        torch.testing.assert_close(o_body, o)
    # specialized as the body's T.const is: one kernel per tile extent C
    assert len(row_scale.kernel._cache) == len(row_scale_in_body.kernel._cache) == 2


def test_symbols_of_an_enclosing_function():
    kernel = split_kernel(2, 0.5)
    for n in (1, 6, 33):
        a = torch.randn(n, 4)
        o = torch.zeros(n, 4)
        kernel(a, o)
        torch.testing.assert_close(o, a * 0.5)
    assert len(kernel.kernel._cache) == 1


@tilelang.jit
def bump(A, n: int = -1):
    if n < 0:
        n = 8
    A: T.Tensor[[n], T.float32]
    with T.Kernel(1, threads=32):
        for i in T.serial(n):
            A[i] = A[i] + 1.0


@tilelang.jit
def bump_rows(A, O, block: int = 0):
    M = T.dynamic("M")
    if block == 0:
        width = 16
    elif block > 32:
        width = 32
    else:
        width = block
    A: T.Tensor[[M, width], T.float32]
    O: T.Tensor[[M, width], T.float32]
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(width):
            O[bx, j] = A[bx, j] + width


def test_assignment_under_an_if_before_the_annotation():
    a = torch.zeros(8)
    bump(a)                         # n = -1: the body's 8
    torch.testing.assert_close(a, torch.ones(8))
    b = torch.zeros(4)
    bump(b, 4)
    torch.testing.assert_close(b, torch.ones(4))
    with pytest.raises(ValueError, match="A"):
        bump(torch.zeros(4))        # 8 elements expected
    for block, width in ((0, 16), (64, 32), (8, 8)):
        x = torch.randn(3, width)
        o = torch.zeros(3, width)
        bump_rows(x, o, block)
        torch.testing.assert_close(o, x + width)


def test_binding_not_followed_is_a_clear_error():
    @tilelang.jit
    def looped(A, n: int = 2):
        for _ in range(2):
            n = n * 2
        A: T.Tensor[[n], T.float32]
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    with pytest.raises(CompileError, match=r"'n' is assigned in a for loop \(line \d+\) "
                                           r"before the annotation that uses it"):
        looped(torch.zeros(8))

    @tilelang.jit
    def noisy(A, n: int = -1):
        if n < 0:
            print("defaulting")
            n = 8
        A: T.Tensor[[n], T.float32]
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    with pytest.raises(CompileError, match=r"'n' is assigned under an if \(line \d+\) "
                                           r"before the annotation that uses it"):
        noisy(torch.zeros(8))


def test_a_dynamic_symbol_is_named_so_in_annotation_errors():
    @tilelang.jit
    def bad(A, n: int = -1):
        num_tokens = T.dynamic("num_tokens")
        A: T.Tensor[[num_tokens, n], T.float32]
        with T.Kernel(num_tokens, threads=32) as bx:
            A[bx, 0] = 1.0

    with pytest.raises(TypeError, match=r"T\.dynamic\('num_tokens'\), -1") as caught:
        bad(torch.zeros(2, 8))
    assert "T.const" not in str(caught.value)


@pytest.mark.gpu
def test_outer_symbols_on_gpu():
    for n in (3, 40):
        a = torch.randn(n, 4, device="cuda")
        o = torch.zeros_like(a)
        double_rows(a, o)
        o_sim = torch.zeros(n, 4)
        double_rows(a.cpu(), o_sim)
        torch.testing.assert_close(o, a * 2)
        torch.testing.assert_close(o.cpu(), o_sim)
    a = torch.randn(130, device="cuda")
    o = torch.zeros_like(a)
    add_one(a, o)
    torch.testing.assert_close(o, a + 1)
    a = torch.randn(5, 64, device="cuda")
    o = torch.zeros_like(a)
    row_scale(a, o)
    o_sim = torch.zeros(5, 64)
    row_scale(a.cpu(), o_sim)
    torch.testing.assert_close(o, a * 3.0)
    torch.testing.assert_close(o.cpu(), o_sim)
    kernel = split_kernel(3, 0.25)
    a = torch.randn(9, 4, device="cuda")
    o = torch.zeros_like(a)
    kernel(a, o)
    o_sim = torch.zeros(9, 4)
    kernel(a.cpu(), o_sim)
    torch.testing.assert_close(o, a * 0.25)
    torch.testing.assert_close(o.cpu(), o_sim)
    x = torch.zeros(8, device="cuda")
    bump(x)
    torch.testing.assert_close(x.cpu(), torch.ones(8))

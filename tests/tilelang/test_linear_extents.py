"""Symbolic extents that are linear in one symbol in a ``T.prim_func``'s annotations
(``T.Tensor((n * 4,), ...)``, ``n + 1``, ``3 * n + 1``), as TileLang's programs write
them: the tensor's size gives ``n`` (a whole number, or a clear error), the body reads it,
outputs take their size from it."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def _kernels():
    n = T.dynamic("n")

    @T.prim_func
    def times4(A: T.Tensor((n * 4,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in range(n * 4):
                A[i] = i

    @T.prim_func
    def plus1(A: T.Tensor((n + 1,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in range(n + 1):
                A[i] = i

    @T.prim_func
    def times3_plus1(A: T.Tensor((n * 3 + 1,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in range(n * 3 + 1):
                A[i] = i

    @T.prim_func
    def twice_minus2(A: T.Tensor((2 * n - 2,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in range(2 * n - 2):
                A[i] = i
    return {"times4": times4, "plus1": plus1, "times3_plus1": times3_plus1,
            "twice_minus2": twice_minus2}


@pytest.mark.parametrize("name,size", [("times4", 16), ("plus1", 16), ("times3_plus1", 16),
                                       ("twice_minus2", 6)])
def test_the_size_gives_the_symbol(name, size):
    a = torch.full((size,), -1, dtype=torch.int32)
    tilelang.compile(_kernels()[name])(a)
    assert a.tolist() == list(range(size))


def test_a_size_no_symbol_gives_is_an_error():
    with pytest.raises(ValueError, match="shape\\[0\\] is 15, which no n makes 4 \\* n"):
        tilelang.compile(_kernels()["times4"])(torch.zeros(15, dtype=torch.int32))


def test_two_extents_of_one_symbol_must_agree_and_size_an_output():
    n = T.dynamic("n")

    @T.prim_func
    def pad(A: T.Tensor((n,), T.float32), B: T.Tensor((n + 2,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in range(n + 2):
                B[i] = T.if_then_else(0 < i and i <= n, A[i - 1], 0.0)

    kernel = tilelang.compile(pad, out_idx=[1])
    b = kernel(torch.arange(1.0, 6.0))
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
    with pytest.raises(ValueError, match="symbol n"):
        kernel(torch.zeros(5), torch.zeros(9))

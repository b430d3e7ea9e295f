"""Compile-time ``if`` statements and conditional expressions on a factory's closure
values, decided when the kernel is parsed (``frontend/static_branches.py``): module
globals are read when the kernel first compiles, so their tests stay; a lambda's
parameters are its own."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

MODE = 1


@tilejit.kernel
def on_a_global(A):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            if MODE == 1:
                A[i] = 1.0
            else:
                A[i] = 2.0


def test_a_global_bound_again_before_the_first_compile_is_read_then():
    global MODE
    MODE = 2
    try:
        a = np.zeros(32, np.float32)
        on_a_global(a)
        assert (a == 2.0).all()
    finally:
        MODE = 1


x, y = 1, 2         # globals a lambda's parameters share names with


def max_by_a_lambda(M):
    @T.prim_func
    def main(A: T.Tensor((M,), "int32"), B: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            red = T.alloc_local((1,), "int32")
            with T.attr(T.comm_reducer(lambda x, y: x if x > y else y, [T.int32(-(2 ** 31))]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tx], True, red[0], tx,
                                                  dtype="handle"))
            B[tx] = red[0]
    return main


def test_a_lambdas_parameters_are_not_the_globals_of_the_same_name():
    a = torch.randint(-100, 100, (32,), dtype=torch.int32)
    a[5] = 1000
    b = tilejit.compile(max_by_a_lambda(32), out_idx=[1])(a)
    assert (b == 1000).all()


def factory(op):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0 if op == "double" else A[i] + 1.0
                if op == "double":
                    B[i] = B[i] + 0.5
    return main


def test_a_closures_value_decides_the_branch():
    a = torch.arange(8, dtype=torch.float32)
    torch.testing.assert_close(tilejit.compile(factory("double"), out_idx=[1])(a), a * 2 + 0.5)
    torch.testing.assert_close(tilejit.compile(factory("inc"), out_idx=[1])(a), a + 1)


SHAPE, GRID = (64, 64), (1, 1)


def spelled_out(variant):
    """``T.Parallel(*shape)``, ``T.Kernel(*grid)`` and the tile operations' operands by
    keyword, as TileLang's Python passes them."""
    M = N = K = 64

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(*GRID, threads=128) as (bx, by):
            A_s = T.alloc_shared(shape=(M, K), dtype="float16")
            B_s = T.alloc_shared((K, N), dtype="float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.fill(acc, value=0)
            if variant == "keywords":
                T.gemm(A_s, B_s, C=acc, policy=T.GemmWarpPolicy.FullRow)
            else:
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(*SHAPE):
                acc[i, j] = acc[i, j] * 2
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("variant", ["keywords", "positional"])
def test_starred_tuples_and_keywords_are_spelled_out(variant, ptxas):
    import torch
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    kernel = tilejit.compile(spelled_out(variant), out_idx=[2])
    torch.testing.assert_close(kernel(a, b).double(), 2 * a.double() @ b.double(),
                               rtol=1e-3, atol=1e-3)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


RANKED = (16,)


def _by_rank(A, B):
    with T.Kernel(1, threads=32):
        if len(RANKED) == 1:
            for i in T.Parallel(32):
                B[i] = A[i] + RANKED[0]
        else:
            for i in T.Parallel(32):
                B[i] = A[i] + RANKED[1]      # out of range for a 1-d RANKED: never typed


@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_a_test_of_a_global_through_len_leaves_the_other_branch_untyped(target):
    a = np.arange(32, dtype=np.float32)
    if target == "sim":
        b = np.zeros(32, np.float32)
        tilejit.kernel(_by_rank, target="sim")(a, b)
        np.testing.assert_array_equal(b, a + 16)
    else:
        ptx = tilejit.kernel(_by_rank).compile(a, np.zeros(32, np.float32), target="cuda",
                                               arch="sm_90a").ptx
        assert "add.f32" in ptx


def test_only_pure_builtins_fold():
    from tilejit.frontend.source import static_truth
    import ast
    test = ast.parse("len(s) == 2 and max(s) > 3", mode="eval").body
    assert static_truth(test, {"s": (1, 4)}, set()) is True
    # a name the program binds to something else, or a call that is not a pure builtin
    assert static_truth(test, {"s": (1, 4), "len": lambda x: 0}, set()) is None
    assert static_truth(ast.parse("print(s)", mode="eval").body, {"s": 1}, set()) is None

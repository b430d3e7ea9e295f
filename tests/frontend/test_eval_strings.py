"""Python's ``eval`` of a string the program gives, in a kernel body (a benchmark harness
builds its row reductions' epilogues so: ``C[bx] = eval(post)``, ``post = "r[0] / N"``):
the expression as if written there, in simulation and on the GPU; a string the kernel
computes, and eval's globals/locals, are errors at the line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

MEAN = "r[0] / N"


def row_reduction(M, N, post):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=32) as bx:
            r = T.alloc_fragment((1,), "float32")
            row = T.alloc_fragment((1, N), "float32")
            T.copy(A[bx, 0], row)
            T.reduce_sum(row, r, dim=1, clear=True)
            C[bx] = eval(post)
    return main


SCALE = "A[i] * 2.0 + 1.0"


@tilejit.kernel
def scaled_by_a_global(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = eval(SCALE)


@pytest.mark.parametrize("post, want", [("r[0] / N", lambda a: a.mean(1)),
                                        ("r[0]", lambda a: a.sum(1)),
                                        ("T.sqrt(r[0] * r[0])", lambda a: np.abs(a.sum(1)))])
def test_a_closure_string_is_the_expression(post, want):
    a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    c = np.zeros(4, np.float32)
    tilejit.compile(row_reduction(4, 64, post), target="sim")(a, c)
    np.testing.assert_allclose(c, want(a.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_a_global_string_is_the_expression():
    a = np.arange(32, dtype=np.float32)
    b = np.zeros(32, np.float32)
    scaled_by_a_global(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_its_ptx_assembles(arch, ptxas):
    ptx = tilejit.compile(row_reduction(4, 64, MEAN), target=f"cuda -arch={arch}")\
        .get_kernel_source()
    # r[0] / N: the row's sum by shuffles, times 1/64 (0f3C800000)
    assert "shfl.sync.bfly.b32" in ptx and "0f3C800000" in ptx, ptx[-2000:]
    ptxas(ptx, arch)


def test_a_string_the_kernel_computes_is_an_error():
    with pytest.raises(CompileError, match=r"eval\(text\) in a kernel: expected a string "
                                           r"known when the kernel compiles") as info:
        @tilejit.kernel
        def computed(A, B):
            with T.Kernel(1, threads=32) as bx:
                text = "A[0]"
                B[0] = eval(text)  # marker: computed
    assert "marker: computed" in str(info.value)


def test_eval_with_a_namespace_and_a_bad_expression_are_errors():
    with pytest.raises(CompileError, match=r"eval\(\) in a kernel takes one string"):
        @tilejit.kernel
        def with_globals(A, B):
            with T.Kernel(1, threads=32) as bx:
                B[0] = eval("A[0]", {})
    with pytest.raises(CompileError, match=r"eval\('A\[0\] \+'\) in a kernel: not a Python "
                                           r"expression"):
        @tilejit.kernel
        def not_an_expression(A, B):
            with T.Kernel(1, threads=32) as bx:
                B[0] = eval("A[0] +")


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.randn(8, 128)
    c = torch.zeros(8, device="cuda")
    tilejit.compile(row_reduction(8, 128, MEAN))(a.cuda(), c)
    sim = torch.zeros(8)
    tilejit.compile(row_reduction(8, 128, MEAN), target="sim")(a, sim)
    torch.testing.assert_close(c.cpu().double(), a.double().mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.cpu(), sim, rtol=1e-6, atol=1e-6)

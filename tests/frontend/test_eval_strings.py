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


# -- f-strings of values the program gives (TileLang's issue tests pick a reduction by name)
def picked_reduction(op, spec=""):
    @T.prim_func
    def main(A: T.Tensor((32, 32), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((32, 32), "int32")
            b = T.alloc_fragment((32,), "int32")
            T.copy(A, a)
            getattr(T, f"reduce_{op!s:{spec}}")(a, b, dim=1)
            T.copy(b, B)
    return main


def test_an_f_string_of_known_values_is_folded(ptxas):
    a = np.random.default_rng(0).integers(0, 2**30, (32, 32), dtype=np.int32)
    b = np.zeros(32, np.int32)
    tilejit.compile(picked_reduction("bitor"))(a, b)
    assert np.array_equal(b, np.bitwise_or.reduce(a, axis=1))
    b = np.zeros(32, np.int32)
    tilejit.compile(picked_reduction("max", "<3"))(a, b)
    assert np.array_equal(b, a.max(1))
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(picked_reduction("bitor"), target=f"cuda -arch={arch}") \
            .get_kernel_source()
        assert "or.b32" in ptx
        ptxas(ptx, arch)


def test_an_f_string_of_a_value_the_kernel_computes_is_an_error():
    with pytest.raises(CompileError, match="unsupported in a kernel: an f-string"):
        @tilejit.kernel
        def computed(A, B):
            with T.Kernel(1, threads=32) as bx:
                x = A[0]
                s = f"{x}"
                B[0] = x


@pytest.mark.gpu
def test_a_picked_reduction_on_the_gpu_against_numpy_and_the_simulator():
    import torch
    a = torch.randint(0, 2**30, (32, 32), dtype=torch.int32)
    kernel = tilejit.compile(picked_reduction("bitor"))
    b = torch.zeros(32, dtype=torch.int32, device="cuda")
    kernel(a.cuda(), b)
    sim = torch.zeros(32, dtype=torch.int32)
    kernel(a, sim)
    assert np.array_equal(b.cpu().numpy(), np.bitwise_or.reduce(a.numpy(), axis=1))
    assert torch.equal(b.cpu(), sim)

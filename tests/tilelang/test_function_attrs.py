"""TileLang's function-level annotations (``T.annotate_pass_configs``,
``T.annotate_compile_flags``: ``language/function_attrs.py``), a PrimFunc's ``attrs``,
and ``out_idx`` of a program whose tensors are annotated (``tilelang/output_params.py``):
in simulation against torch (float64 where it matters), the PTX checked for what the
configs ask for and assembled by ptxas, with ``-m gpu`` against the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tests.tilelang.test_lazy_prim_func import written_outputs

PassConfigKey = tilelang.PassConfigKey

FAST = {PassConfigKey.TL_ENABLE_FAST_MATH: True}


def lazy_exp2():
    @T.prim_func
    def kernel(A, B):
        A: T.Tensor[[256], T.float32]
        B: T.Tensor[[256], T.float32]
        T.annotate_pass_configs(FAST)
        T.annotate_compile_flags(["--use_fast_math"])
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = T.exp2(A[bx * 128 + i])
    return kernel


def test_prim_func_attrs():
    kernel = lazy_exp2()
    assert kernel.attrs["global_symbol"] == "kernel"
    assert kernel.attrs["tilelang_pass_configs"] == FAST
    assert kernel.attrs["tilelang_compile_flags"] == ["--use_fast_math"]
    assert "tilelang_out_idx" not in kernel.attrs

    @T.prim_func
    def returns(A):
        A: T.Tensor[[8], T.float32]
        B = T.empty([8], T.float32)
        C = T.empty([8], T.float32)
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i]
                C[i] = A[i]
        return B, C
    assert returns.attrs["tilelang_out_idx"] == [-2, -1]


def test_annotated_pass_configs_are_the_programs_options(ptxas):
    compiled = tilelang.compile(lazy_exp2(), out_idx=[-1])
    a = torch.randn(256)
    torch.testing.assert_close(compiled(a), torch.exp2(a.double()).float())
    for arch in ("sm_80", "sm_90a"):
        source = compiled.compile(A=T.Tensor[[256], T.float32], arch=arch).get_kernel_source()
        assert "ex2.approx.ftz.f32" in source
        ptxas(source, arch)
    # compile()'s own pass_configs apply over the annotated ones, key by key
    exact = tilelang.compile(lazy_exp2(), out_idx=[-1],
                             pass_configs={PassConfigKey.TL_DISABLE_FAST_MATH: True})
    assert not exact.kernel.fast_math


def test_signature_annotated_prim_func_takes_the_annotation(ptxas):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        T.annotate_pass_configs(FAST)
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = T.exp2(A[bx * 128 + i])
    assert main.pass_configs == FAST
    kernel = tilelang.compile(main, out_idx=[1])
    a = torch.randn(256)
    torch.testing.assert_close(kernel(a), torch.exp2(a.double()).float())
    source = kernel.get_kernel_source(arch="sm_90a")
    assert "ex2.approx.ftz.f32" in source
    ptxas(source, "sm_90a")


def test_eager_program_annotation_after_t_empty():
    @tilelang.jit
    def add_one(A):
        M, N = T.const("M N")
        A: T.Tensor[[M, N], T.float32]
        B = T.empty([M, N], T.float32)
        T.annotate_pass_configs(FAST)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j] + 1.0
        return B
    assert add_one.pass_configs == FAST and add_one.kernel.fast_math
    a = torch.randn(8, 16)
    torch.testing.assert_close(add_one(a), a + 1)


def test_annotation_inside_the_kernel_is_refused():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            T.annotate_pass_configs(FAST)
            for i in T.Parallel(32):
                A[i] = 0.0
    with pytest.raises(tilelang.CompileError, match="top of the kernel function's body"):
        tilelang.compile(main)(torch.zeros(32))


def test_annotation_of_a_value_not_known_at_definition():
    with pytest.raises(tilelang.CompileError, match=r"T.annotate_pass_configs: the argument "
                       r"`configs` must be a value known when the function is defined"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            configs = {PassConfigKey.TL_ENABLE_FAST_MATH: True}
            T.annotate_pass_configs(configs)
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    A[i] = 0.0
    with pytest.raises(tilelang.CompileError, match="expected a list of strings"):
        @T.prim_func
        def flags(A: T.Tensor((32,), "float32")):
            T.annotate_compile_flags(3)
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    A[i] = 0.0


# -- out_idx of annotated parameters ------------------------------------------------------

@pytest.mark.parametrize("out_idx", [[1, 2], [2, 1], [-2, -1]])
def test_lazy_out_idx_allocates_and_returns_in_order(out_idx):
    compiled = tilelang.compile(written_outputs(), out_idx=out_idx)
    a = torch.arange(19, dtype=torch.float32)
    b, c = compiled(a) if out_idx[0] % 3 == 1 else compiled(a)[::-1]
    torch.testing.assert_close(b, a.repeat(3)[:39] + 1.0)
    torch.testing.assert_close(c, torch.arange(20, dtype=torch.float32))


def test_eager_out_idx_with_signature_annotations():
    N = 64

    @tilelang.jit(out_idx=[-1])
    def scale(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(N):
                B[i] = A[i] * 3.0
    a = torch.randn(N)
    torch.testing.assert_close(scale(a), a * 3)


def test_out_idx_errors():
    with pytest.raises(ValueError, match="Out index conflict"):
        @tilelang.jit(out_idx=[-1])
        def returns(A):
            A: T.Tensor[[8], T.float32]
            B = T.empty([8], T.float32)
            with T.Kernel(1, threads=8):
                for i in T.Parallel(8):
                    B[i] = A[i]
            return B
    with pytest.raises(ValueError, match=r"out_idx \[5\] out of range for the 2 parameters"):
        tilelang.compile(lazy_exp2(), out_idx=[5])
    with pytest.raises(tilelang.CompileError, match="not the extent of any annotated tensor"):
        @tilelang.jit(out_idx=[-1])
        def unsized(A, B):
            n, k = T.dynamic("n"), T.dynamic("k")
            A: T.Tensor[[n], T.float32]
            B: T.Tensor[[k], T.float32]
            with T.Kernel(1, threads=8):
                for i in T.serial(n):
                    B[i] = A[i]
        unsized(torch.zeros(8))


@pytest.mark.gpu
def test_gpu_matches_the_simulator():
    compiled = tilelang.compile(lazy_exp2(), out_idx=[-1])
    a = torch.randn(256)
    torch.testing.assert_close(compiled(a.cuda()).cpu(), compiled(a), rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(compiled(a.cuda()).cpu().double(), torch.exp2(a.double()),
                               rtol=1e-5, atol=1e-6)
    two = tilelang.compile(written_outputs(), out_idx=[2, 1])
    x = torch.arange(19, dtype=torch.float32)
    for got, want in zip(two(x.cuda()), two(x)):
        torch.testing.assert_close(got.cpu(), want)


Buf = T.Tensor((8,), "float32")


def test_output_annotation_forms():
    """An output annotated by a name bound to a T.Tensor, with no dtype (float32), or
    through `Tensor` imported by name."""
    @T.prim_func
    def aliased(A, B):
        A: Buf
        B: Buf
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] + 1
    torch.testing.assert_close(tilelang.compile(aliased, out_idx=[-1])(torch.zeros(8)),
                               torch.ones(8))

    @tilelang.jit(out_idx=[-1])
    def untyped(A, B):
        n = T.dynamic("n")
        A: T.Tensor[(n,)]
        B: T.Tensor[(n,)]
        with T.Kernel(1, threads=8):
            for i in T.serial(n):
                B[i] = A[i] + 1
    out = untyped(torch.zeros(5))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.ones(5))

    @tilelang.jit(out_idx=[-1])
    def by_name(A, B):
        A: Tensor[[8], T.float32]
        B: Tensor[[8], T.float16]
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] + 1
    out = by_name(torch.zeros(8))
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, torch.ones(8, dtype=torch.float16))


Tensor = T.Tensor


def test_compile_specs_of_numpy_extents_and_dynamic_placeholders(ptxas):
    import numpy as np

    @tilelang.jit(out_idx=[-1])
    def copy(A, B):
        n = T.dynamic("n")
        A: T.Tensor[[n], T.float32]
        B: T.Tensor[[n], T.float32]
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i]
    spec = copy.compile(A=T.Tensor[[np.int64(64)], T.float32], arch="sm_90a")
    ptxas(spec.get_kernel_source(), "sm_90a")
    # a T.dynamic symbol no tensor sizes takes a placeholder: the kernel is one for all
    ptxas(copy.get_kernel_source(arch="sm_80"), "sm_80")
    ptxas(spec.get_kernel_source(arch="sm_80"), "sm_80")


def test_future_annotations_of_a_classic_prim_func():
    from tests.tilelang.future_annotations_program import doubled
    a = torch.randn(16)
    torch.testing.assert_close(tilelang.compile(doubled, out_idx=[-1])(a), a * 2)


def test_future_annotations_read_the_factorys_locals(ptxas):
    """An annotation string names ``dtype``, a local of the function the kernel is defined
    in that its body never reads: evaluated with that function's locals."""
    from tests.tilelang.future_annotations_program import scaled
    a = torch.randn(100)
    kernel = tilelang.compile(scaled(100, 64, 3.0), out_idx=[-1])
    torch.testing.assert_close(kernel(a), a * 3)
    ptxas(tilelang.compile(scaled(100, 64, 3.0), out_idx=[-1], target="cuda -arch=sm_80")
          .get_kernel_source(), "sm_80")

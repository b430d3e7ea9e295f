"""Scalar parameters of a ``@T.prim_func`` (``l: T.int32``), as TileLang's programs
declare them: passed at each call, checked for their kind, usable in the body; refused as
outputs; the PTX assembles."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def window(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), lo: T.int32, hi: T.int32, scale: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                if k < N:
                    A[k] = T.if_then_else(lo <= k and k < hi, k * scale, 0.0)
    return main


def test_scalars_are_passed_at_each_call():
    kernel = tilelang.compile(window(1000))
    a = torch.full((1000,), -1.0)
    kernel(a, 10, 500, 0.5)
    ref = torch.where((torch.arange(1000) >= 10) & (torch.arange(1000) < 500),
                      torch.arange(1000) * 0.5, torch.zeros(1000))
    torch.testing.assert_close(a, ref.float())
    kernel(a, np.int32(0), 3, 2)                     # numpy ints; an int for a float
    assert a[:4].tolist() == [0.0, 2.0, 4.0, 0.0]


def test_a_scalar_of_the_wrong_kind_names_the_parameter():
    kernel = tilelang.compile(window(64))
    with pytest.raises(TypeError, match="'lo': expected an int32 scalar, got float"):
        kernel(torch.zeros(64), 1.5, 3, 1.0)
    with pytest.raises(TypeError, match="'hi'"):
        kernel(torch.zeros(64), 1, torch.zeros(1), 1.0)


def test_a_scalar_cannot_be_an_output():
    with pytest.raises(ValueError, match="scalar"):
        tilelang.compile(window(64), out_idx=[1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = tilelang.compile(window(1000)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)


def test_an_annotation_that_is_neither_is_still_refused():
    with pytest.raises(TypeError, match="T.Tensor/T.Buffer annotation or a scalar dtype"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.float32), n: int):
            pass


# -- a scalar is its annotation's dtype: float32 times float16 computes in float32 ------
def scaled(N):
    @T.prim_func
    def main(X: T.Tensor((N,), T.float16), Y: T.Tensor((N,), T.float32), alpha: T.float32,
             shift: T.int32):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Y[i] = alpha * X[i] + shift
    return main


@tilelang.jit
def scaled_eager(X, alpha: T.float32):
    N = T.const("N")
    X: T.Tensor[(N,), T.float16]
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(N):
            Y[i] = alpha * X[i]
    return Y


def _threes(device="cpu"):
    return torch.full((128,), 3.0, dtype=torch.float16, device=device)


def test_a_float32_scalar_times_a_float16_element_is_float32():
    """A Python float for `alpha: T.float32` was a weak float: 3 · 1.0001 was rounded to
    float16 (3.0) where TileLang's float32 variable gives 3.0003."""
    y = torch.zeros(128)
    tilelang.compile(scaled(128))(_threes(), y, 1.0001, 2)
    assert y[0].item() == pytest.approx(5.0003, abs=1e-6)
    assert scaled_eager(_threes(), 1.0001)[0].item() == pytest.approx(3.0003, abs=1e-6)


def test_an_eager_programs_typed_scalar_is_a_run_time_value():
    """It was made a compile-time constant: each value compiled a kernel of its own."""
    scaled_eager(_threes(), 1.5)
    scaled_eager(_threes(), 2.5)
    assert len(scaled_eager.kernel._cache) == 1
    with pytest.raises(ValueError, match="'shift': 4294967296 does not fit in int32"):
        tilelang.compile(scaled(128))(_threes(), torch.zeros(128), 1.0, 2 ** 32)


@pytest.mark.gpu
def test_typed_scalars_on_the_gpu():
    y = torch.zeros(128, device="cuda")
    tilelang.compile(scaled(128))(_threes("cuda"), y, 1.0001, 2)
    assert y[0].item() == pytest.approx(5.0003, abs=1e-6)
    assert scaled_eager(_threes("cuda"), 1.0001)[0].item() == pytest.approx(3.0003, abs=1e-6)


@tilelang.jit
def _typed_block(X, block: T.int32):
    N = T.const("N")
    X: T.Tensor[(N,), T.float32]
    Y = T.empty((N,), T.float32)
    with T.Kernel(N // block, threads=128) as bx:
        s = T.alloc_shared((block,), T.float32)
        T.copy(X[bx * block], s)
        T.copy(s, Y[bx * block])
    return Y


def test_a_typed_scalar_used_as_a_tile_size_says_why():
    """Found by a review: an eager program's `block: T.int32` used to specialize; as a
    run-time value it cannot size a tile, and the error says so and how to write it."""
    with pytest.raises(tilelang.CompileError, match=r"'block' is annotated T.int32: a "
                                                    r"run-time value"):
        _typed_block(torch.zeros(256), 64)


@tilelang.jit
def eager_scaled(A: T.Tensor[(4,), T.float32], s: T.float32, n: T.int32):
    B = T.empty((4,), T.float32)
    with T.Kernel(1, threads=32):
        for i in T.Parallel(4):
            B[i] = A[i] * s + n
    return B


@pytest.mark.parametrize("s, n, match", [
    (None, 1, "argument 's': expected a float32 scalar, got NoneType"),
    (2.0, 1.7, "argument 'n': expected an int32 scalar, got float 1.7"),
    (2.0, "3", "argument 'n': expected an int32 scalar, got str '3'"),
    ([1.0], 1, "argument 's': expected a float32 scalar, got list"),
    (True, 1, "argument 's': expected a float32 scalar, got bool True")])
def test_an_eager_programs_typed_scalars_are_checked(s, n, match):
    with pytest.raises(TypeError, match=match):
        eager_scaled(torch.ones(4), s, n)


def test_an_eager_programs_typed_scalars():
    assert eager_scaled(torch.ones(4), 2, 3).tolist() == [5.0] * 4
    assert eager_scaled(torch.ones(4), np.float32(0.5), np.int64(1)).tolist() == [1.5] * 4


# a review's findings: a dtype annotation is the dtype, never a name evaluated again (a
# dtype is a str: `T.bool` read as Python's `bool`, `T.float32` as a module's float32)
float32 = np.float32        # a module-level name spelled as a dtype


def flagged(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), flag: T.bool,
             s: T.float32):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[i] = T.if_then_else(flag, X[i] * s, X[i])
    return main


def test_bool_and_float_scalars_annotated_with_dtypes():
    kernel = tilelang.compile(flagged(8), out_idx=[1])
    x = torch.randn(8)
    torch.testing.assert_close(kernel(x, True, 2.0), x * 2)
    torch.testing.assert_close(kernel(x, False, 2.0), x)
    with pytest.raises(TypeError, match="'flag': expected a bool scalar"):
        kernel(x, 1.5, 2.0)


@pytest.mark.gpu
def test_bool_and_float_scalars_on_the_gpu():
    kernel = tilelang.compile(flagged(64), out_idx=[1])
    x = torch.randn(64, device="cuda")
    torch.testing.assert_close(kernel(x, True, 3.0), x * 3)
    torch.testing.assert_close(kernel(x, False, 3.0), x)
    sim = tilelang.compile(flagged(64), out_idx=[1], target="sim")
    torch.testing.assert_close(kernel(x, True, 3.0).cpu(), sim(x.cpu(), True, 3.0))


def test_a_misspelled_dtype_string_is_named():
    def cast_to(dtype):
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(8):
                    Y[i] = T.cast(X[i], dtype)
        return main

    with pytest.raises(tilelang.CompileError, match=r"T.cast\(value, dtype\): unknown dtype "
                       r"'flaot16'") as info:
        @T.prim_func
        def literal(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(8):
                    Y[i] = T.cast(X[i], "flaot16")
        tilelang.compile(literal, out_idx=[1])
    assert 'T.cast(X[i], "flaot16")' in str(info.value)
    with pytest.raises(tilelang.CompileError, match=r"unknown dtype 'flaot16'"):
        tilelang.compile(cast_to("flaot16"), out_idx=[1])

    with pytest.raises(tilelang.CompileError, match=r"T.alloc_var: unknown dtype 'floatt32'"):
        @T.prim_func
        def variable(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                v = T.alloc_var("floatt32", init=1.0)
                for i in T.Parallel(8):
                    Y[i] = X[i] + v
        tilelang.compile(variable, out_idx=[1])

    @T.prim_func
    def tensor_init(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.alloc_var("float16", init=X)
            for i in T.Parallel(8):
                Y[i] = X[i] + v
    with pytest.raises(tilelang.CompileError, match=r"expected one value \(a number, an "
                       r"element\) to convert to float16, got GlobalTensor"):
        tilelang.compile(tensor_init, out_idx=[1])


def gated(N, block=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), on: T.bool, n: T.int32, s: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if on and bx * block + i < n:
                    A[bx * block + i] = s
    return main


@pytest.mark.parametrize("program", [window, gated])
def test_the_kernel_compiled_at_compile_is_the_one_the_call_runs(program, monkeypatch):
    """``tilejit.compile`` checks the program by compiling it (TileLang compiles there);
    its scalars take the annotations' dtypes, as a call's do, so the call reuses that
    kernel: one compilation, not two (block-causal attention's varlen test compiled
    every kernel twice, int64 then int32)."""
    import tilejit.compiler.pipeline as pipeline
    calls = []
    compile_kernel = pipeline.compile_kernel
    monkeypatch.setattr(pipeline, "compile_kernel",
                        lambda ks, spec: calls.append(spec) or compile_kernel(ks, spec))
    import tilejit.options
    monkeypatch.setattr(tilejit.options, "_cache_choice", [False])     # no disk cache
    kernel = tilelang.compile(program(256))
    args = (10, 500, 0.5) if program is window else (True, 100, 2.0)
    kernel(torch.zeros(256), *args)
    kernel(torch.zeros(256), *args)
    assert len(calls) == 1, calls


def tokens_plus_one(block=32):
    """``tokens: n``: a parameter annotated with the shape symbol itself (a third-party
    Q/K-norm RoPE kernel passes its token count so); it sizes ``x`` and bounds the
    grid."""
    n = T.dynamic("n")

    @T.prim_func
    def main(tokens: n, x: T.Tensor((n, 4), T.float32)):
        with T.Kernel(T.ceildiv(tokens, block), threads=block) as b:
            i = b * block + T.get_thread_binding()
            if i < tokens:
                for j in T.serial(4):
                    x[i, j] = x[i, j] + i
    return main


@pytest.mark.parametrize("count", [1, 40, 100])
def test_a_parameter_annotated_with_a_symbol_is_its_value(count):
    x = torch.zeros(count, 4)
    tilelang.compile(tokens_plus_one(), target="sim")(count, x)
    torch.testing.assert_close(x, torch.arange(count, dtype=torch.float32)[:, None].expand(
        count, 4).contiguous())


def test_a_symbols_value_and_a_tensors_extent_must_agree():
    kernel = tilelang.compile(tokens_plus_one(), target="sim")
    with pytest.raises(ValueError, match="symbol n: tokens has 40 but x.shape"):
        kernel(40, torch.zeros(50, 4))
    assert [p.shape for p in kernel.params] == [[], ["n", 4]]


@pytest.mark.gpu
def test_a_symbol_parameter_on_the_gpu_against_the_simulator():
    x = torch.randn(70, 4, device="cuda")
    sim = x.cpu().clone()
    tilelang.compile(tokens_plus_one())(70, x)
    tilelang.compile(tokens_plus_one(), target="sim")(70, sim)
    torch.testing.assert_close(x.cpu(), sim)

"""TileLang spellings a user-style fuzz found refused or failing: keywords of T.serial /
T.unroll (an internal error), T.use_swizzle(order="column"), a fragment's own .shape as a
T.Parallel's extents, and the attributes of an autotuned kernel (config, latency,
ref_latency). In simulation and PTX; the GPU twin runs the kernels on the device."""
import math

import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


def _unrolled(N=16):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_var(T.float32, 0.0)
            for i in T.unroll(0, N, unroll_factor=4):
                acc += A[i]
            B[0] = acc
            acc = 0.0
            for i in T.serial(0, N, step=2, annotations={"pragma": 1}):
                acc += A[i]
            B[1] = acc
    return main


def _shape_extents(M=16, N=32):
    @T.macro
    def halve(dst):
        for i, j in T.Parallel(dst.shape[0], dst.shape[1]):
            dst[i, j] = dst[i, j] * 0.5

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((M, N), "float32")
            T.copy(A, f)
            bm, bn = f.shape
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] + 1.0
            halve(f)
            T.copy(f, B)
    return main


def _swizzled(M=256, N=256, block=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            T.use_swizzle(panel_size=2, order="column")
            for i, j in T.Parallel(block, block):
                B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] + 1
    return main


@tilelang.autotune(configs=[{"block": 32, "threads": 32}, {"block": 64, "threads": 64}],
                   warmup=1, rep=1)
@tilelang.jit(out_idx=[-1])
def _doubled(N, block=128, threads=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] * 2
    return main


def _check_all(device):
    a = torch.randn(16, device=device)
    b = torch.zeros(2, device=device)
    tilelang.compile(_unrolled())(a, b)
    torch.testing.assert_close(b.cpu(), torch.stack([a.sum(), a[::2].sum()]).cpu())
    x = torch.randn(16, 32, device=device)
    torch.testing.assert_close(tilelang.compile(_shape_extents(), out_idx=[1])(x).cpu(),
                               ((x + 1) * 0.5).cpu())
    y = torch.randn(256, 256, device=device)
    torch.testing.assert_close(tilelang.compile(_swizzled(), out_idx=[1])(y).cpu(),
                               (y + 1).cpu())


def test_in_simulation():
    _check_all("cpu")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    for program in (_unrolled(), _shape_extents(), _swizzled()):
        ptxas(tilelang.compile(program).get_kernel_source(arch=arch), arch)


def test_an_unknown_loop_keyword_names_itself():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(16, stride=2):
                A[i] = 0.0
    with pytest.raises(tilelang.CompileError, match=r"T.serial\(\): unknown or misplaced "
                                                    r"keyword stride="):
        tilelang.compile(main, target="sim")(torch.zeros(16))


def test_an_autotuned_kernel_has_tilelangs_attributes():
    kernel = _doubled(1000)
    assert kernel.config in ({"block": 32, "threads": 32}, {"block": 64, "threads": 64})
    assert kernel.ref_latency is None
    assert math.isnan(kernel.latency)           # simulation: nothing is timed
    a = torch.randn(1000)
    torch.testing.assert_close(kernel(a), a * 2)


@pytest.mark.gpu
def test_on_the_gpu():
    _check_all("cuda")
    kernel = _doubled(1000)
    assert kernel.latency > 0 and kernel.config["block"] in (32, 64)


def numpy_extents(m, n):
    """TileLang's typed constants as extents (``dim = T.int32(dim)``: a numpy integer
    here) in tensor annotations, tile shapes, the grid and T.Parallel."""
    m, n, block = T.int32(m), T.int32(n), T.int32(32)

    @T.prim_func
    def main(A: T.Tensor([m, n], "float32"), B: T.Tensor([m, n], "float32")):
        with T.Kernel(T.ceildiv(m, block), threads=128) as bx:
            s = T.alloc_shared([block, n], "float32")
            f = T.alloc_fragment([block, n], "float32")
            T.copy(A[bx * block, 0], s)
            T.copy(s, f)
            for i, j in T.Parallel(block, n):
                f[i, j] = f[i, j] + 1
            T.copy(f, B[bx * block, 0])
    return main


def test_numpy_integer_extents(ptxas):
    kernel = tilelang.compile(numpy_extents(64, 32), out_idx=[1])
    a = torch.randn(64, 32)
    torch.testing.assert_close(kernel(a), a + 1)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_gpu_numpy_integer_extents():
    kernel = tilelang.compile(numpy_extents(64, 32), out_idx=[1])
    a = torch.randn(64, 32)
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))


def test_typed_constant_written_in_a_shape():
    @tilelang.jit(out_idx=[-1])
    def staged(A, B):
        A: T.Tensor[[16], T.float32]
        B: T.Tensor[[16], T.float32]
        with T.Kernel(1, threads=16):
            s = T.alloc_shared((T.int32(16),), T.float32)
            T.copy(A, s)
            T.copy(s, B)
    a = torch.randn(16)
    torch.testing.assert_close(staged(a), a)


def test_compile_of_a_program_with_a_run_time_scalar(ptxas):
    """`alpha: T.float32` not given to compile(): a run-time scalar, typed by its
    annotation; the compiled program takes it at each call."""
    @tilelang.jit
    def scale(A, alpha, blk):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        alpha: T.float32
        B = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, blk), threads=128) as bx:
            for i in T.Parallel(blk):
                if bx * blk + i < N:
                    B[bx * blk + i] = A[bx * blk + i] * alpha
        return B
    compiled = scale.compile(N=100, blk=64, arch="sm_90a")
    ptxas(compiled.get_kernel_source(), "sm_90a")
    ptxas(compiled.get_kernel_source(arch="sm_80"), "sm_80")
    torch.testing.assert_close(compiled(torch.ones(100), 3.0), torch.full((100,), 3.0))


def test_unknown_language_name_in_a_helper_is_named_at_its_line():
    def act(x):
        return T.expm1(x)               # marker: expm1

    @tilelang.jit(out_idx=[1])
    def k(N):
        @T.prim_func
        def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(N):
                    Y[i] = act(X[i])
        return main
    with pytest.raises(tilelang.CompileError, match=r"unknown name T.expm1: tilejit.language "
                       r"has no 'expm1'; did you mean") as info:
        k(128)(torch.randn(128))
    assert "marker: expm1" in str(info.value)


def test_python_math_of_compile_time_values_is_folded():
    @tilelang.jit(out_idx=[1])
    def scale(N):
        @T.prim_func
        def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(N):
                    Y[i] = X[i] * math.pi / math.sqrt(N)
        return main
    x = torch.randn(64)
    torch.testing.assert_close(scale(64)(x), x * math.pi / 8)

    @tilelang.jit(out_idx=[1])
    def runtime(N):
        @T.prim_func
        def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(N):
                    Y[i] = math.sqrt(X[i])
        return main
    with pytest.raises(tilelang.CompileError, match=r"math.sqrt of a value of the kernel: "
                       r"Python's math module computes at compile time only.*use T.sqrt"):
        runtime(64)(x)


c = 4       # a module global of a constexpr parameter's name: the parameter's value wins


@tilejit.kernel
def _sqrt_of_a_constexpr(X, Y, c: T.constexpr = 3):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            Y[i] = X[i] * math.sqrt(c)


def test_python_math_of_a_constexpr_parameter_in_the_body(ptxas):
    """math.sqrt(c) of a T.constexpr parameter after `with T.Kernel`: folded from the
    specialization's value (a refusal before); the simulator computes it per call."""
    x, y = torch.randn(64), torch.zeros(64)
    for value in (3, 5):
        _sqrt_of_a_constexpr(x, y, c=value)
        torch.testing.assert_close(y, x * math.sqrt(value))
    ptx = _sqrt_of_a_constexpr.compile(x, y, c=5, target="cuda", arch="sm_80").ptx
    assert "0f400F1BBD" in ptx and "sqrt." not in ptx    # sqrt(5) as a float32 constant
    ptxas(ptx, "sm_80")


def unit_loop_accumulation(d=64, rows=8):
    """TileLang's layernorm backward: ``for i, j in T.Parallel(1, D)`` accumulating into a
    (D,) fragment indexed ``[j]`` alone (i has extent 1: one element per iteration)."""
    @T.prim_func
    def main(X: T.Tensor((rows, d), "float32"), G: T.Tensor((d,), "float32")):
        with T.Kernel(1, threads=64):
            X_s = T.alloc_shared((1, d), "float32")
            acc = T.alloc_fragment((d,), "float32")
            T.clear(acc)
            for k in T.serial(rows):
                T.copy(X[k, 0], X_s)
                for i, j in T.Parallel(1, d):
                    acc[j] += X_s[i, j] * 2
            for j in T.Parallel(d):
                G[j] = acc[j]
    return main


@pytest.mark.parametrize("d", [64, 256])
def test_unit_loop_index_write(d, ptxas):
    kernel = tilelang.compile(unit_loop_accumulation(d), out_idx=[1])
    x = torch.randn(8, d)
    torch.testing.assert_close(kernel(x), (x.double().sum(0) * 2).float(), rtol=1e-5,
                               atol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 256])
def test_gpu_unit_loop_index_write(d):
    kernel = tilelang.compile(unit_loop_accumulation(d), out_idx=[1])
    x = torch.randn(8, d)
    torch.testing.assert_close(kernel(x.cuda()).cpu(), kernel(x), rtol=1e-5, atol=1e-5)


@T.macro
def _copy_rows(X, Y):
    M, N = X.shape                   # the caller's T.const names, rebound in the macro
    with T.Kernel(1, threads=32):
        t = T.alloc_fragment((M, N), T.float32)
        T.copy(X[0, 0], t)
        T.copy(t, Y[0, 0])


def test_a_kernel_macro_rebinding_the_callers_symbol_names():
    @tilelang.jit
    def copied(X):
        M, N = T.const("M N")
        X: T.Tensor[[M, N], T.float32]
        Y = T.empty((M, N), T.float32)
        _copy_rows(X, Y)
        return Y
    x = torch.randn(16, 16)
    torch.testing.assert_close(copied(x), x, rtol=0, atol=0)


def test_run_time_scalar_of_the_signature_in_compile(ptxas):
    @tilelang.jit
    def axpy(A, B, scale: T.float32):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B: T.Tensor[[N], T.float32]
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                B[i] = A[i] * scale
    ptxas(axpy.get_kernel_source(N=8), "sm_90a")
    a, b = torch.randn(8), torch.zeros(8)
    compiled = axpy.compile(a, b, 1.0)        # the scalar's value: not baked in
    compiled(a, b, 2.0)
    torch.testing.assert_close(b, a * 2)
    compiled(a, b, 3.0)
    torch.testing.assert_close(b, a * 3)


def _doubling(n, dtype):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                B[i] = A[i] * 2
    return main


def test_a_factory_returning_a_prim_func_another_function_builds():
    @tilelang.jit(out_idx=[-1])
    def double(N, dtype=T.float32):
        return _doubling(N, dtype)
    torch.testing.assert_close(double(16)(torch.ones(16)), torch.full((16,), 2.0))

    @tilelang.jit(out_idx=[-1])
    def typed(N: int, dtype: str = "float32"):
        return _doubling(N, dtype)
    torch.testing.assert_close(typed(8)(torch.ones(8)), torch.full((8,), 2.0))


def test_get_tir_and_par_compile_of_eager_programs(ptxas):
    @tilelang.jit
    def copy(A, B):
        N, M = T.const("N, M")
        A: T.Tensor[[N, M], T.float32]
        B: T.Tensor[[N, M], T.float32]
        with T.Kernel(T.ceildiv(N, 16), threads=32) as bx:
            T.copy(A[bx * 16:bx * 16 + 16, 0:M], B[bx * 16:bx * 16 + 16, 0:M])
    compiled = tilelang.par_compile([copy.get_tir(T.Tensor((32, 16)), T.Tensor((32, 16)))])
    ptxas(compiled[0].get_kernel_source(), "sm_90a")
    (again,) = copy.par_compile([{"A": T.Tensor((32, 16), T.float32),
                                  "B": T.Tensor((32, 16), T.float32)}])
    ptxas(again.get_kernel_source(), "sm_90a")
    a, b = torch.randn(32, 16), torch.zeros(32, 16)
    copy(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_extra_keywords_of_an_eager_program():
    """`**metadata` (TileLang's argument-binding tests): extra keywords are accepted and
    reach no kernel; a body that reads them is an error naming them."""
    @tilelang.jit
    def tiled_copy(A, B, block: int = 8, **metadata):
        M, N = T.const("M N")
        A: T.Tensor[[M, N], T.float32]
        B: T.Tensor[[M, N], T.float32]
        with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=32) as (pm, pn):
            T.copy(A[pm * block:(pm + 1) * block, pn * block:(pn + 1) * block],
                   B[pm * block:(pm + 1) * block, pn * block:(pn + 1) * block])
    a = torch.randn(16, 16)
    for kwargs in ({}, {"block": 4, "tag": "x"}):
        b = torch.zeros(16, 16)
        tiled_copy(a, b, **kwargs)
        torch.testing.assert_close(b, a, rtol=0, atol=0)

    @tilelang.jit
    def reads(A, **metadata):
        A: T.Tensor[[8], T.float32]
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                A[i] = metadata["x"]
    with pytest.raises(tilelang.CompileError, match=r"the body reads \*\*metadata"):
        reads(torch.zeros(8))


def test_a_classic_factorys_func_and_get_tir():
    """TileLang's ``f.func`` (the factory) and ``f.get_tir(...)`` (the prim_func for
    those arguments, compiled by ``tilelang.compile``) of a classic-style program."""
    @tilelang.jit(out_idx=[-1])
    def doubled(N=64):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(N):
                    B[i] = A[i] * 2.0
        return main
    assert doubled.func(N=32).__name__ == "main"
    prim = doubled.get_tir(N=32)
    a = torch.randn(32)
    torch.testing.assert_close(tilelang.compile(prim, out_idx=[-1])(a), a * 2)


@tilelang.jit
def add_one_to_m(A, M):
    M: T.int32
    A: T.Tensor[[M], T.float32]
    B = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
        for i in T.Parallel(32):
            if bx * 32 + i < M:
                B[bx * 32 + i] = A[bx * 32 + i] + 1
    return B


def test_a_scalar_annotated_in_the_body_is_a_run_time_value(ptxas):
    """TileLang's eager notebook's ``M: T.int32`` in the body (not the signature), then
    ``A: T.Tensor[[M], ...]``: a run-time scalar and the tensor's extent (it was a
    NameError from the annotations' evaluation)."""
    for n in (50, 77):
        a = torch.randn(n)
        torch.testing.assert_close(add_one_to_m(a, n), a + 1)
    ptxas(add_one_to_m.get_kernel_source(torch.randn(50), 50, arch="sm_80"), "sm_80")

"""TileLang's dtype and symbol vocabulary as its users write it: ``T.dtype(...)`` (the
dtype class), ``T.float``/``T.bool``/``T.int``/``T.half``… (TileLang's other names),
``T.tfloat32`` (float32 storage, gemm on tf32 tensor cores) and ``T.Var`` (the class of
shape symbols). Simulated, with the PTX of the compiled kernels assembled by ptxas for
sm_80 and sm_90a; the ``gpu`` twins run them on the device."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


# -- T.dtype ---------------------------------------------------------------------------
@pytest.mark.parametrize("value, name", [
    ("float16", "float16"), (torch.float16, "float16"), (np.float32, "float32"),
    (torch.bfloat16, "bfloat16"), ("float", "float32"), ("int", "int32"),
    (T.int8, "int8"), (np.dtype("int64"), "int64"), (torch.bool, "bool")])
def test_t_dtype_makes_a_dtype_from_anything_that_names_one(value, name):
    d = T.dtype(value)
    assert isinstance(d, T.dtype) and d == name and d is T.as_dtype(name)


def test_t_dtype_is_the_class_of_dtypes():
    assert all(isinstance(d, T.dtype) for d in (T.float16, T.bfloat16, T.float, T.bool))
    assert not isinstance("float16", T.dtype)
    assert T.dtype("float16").bits == 16 and T.dtype(T.float).bytes == 4
    assert T.dtype(torch.int32).as_torch() is torch.int32
    with pytest.raises(TypeError, match="unknown dtype 'float17'"):
        T.dtype("float17")


# -- TileLang's other names --------------------------------------------------------------
@pytest.mark.parametrize("name, same", [
    ("float", "float32"), ("bool", "bool"), ("int", "int32"), ("half", "float16"),
    ("double", "float64"), ("short", "int16"), ("long", "int64"), ("uint", "uint32"),
    ("tfloat32", "float32")])
def test_tilelang_names_of_dtypes(name, same):
    d = getattr(T, name)
    assert d == same and d is T.dtype(same)
    assert getattr(torch, d if d != "bool" else "bool") is d.as_torch()


def test_the_language_module_keeps_pythons_builtins():
    # T.float and T.int are dtypes, but the language's own code still means Python's
    assert T.Kernel(4, threads=(32, 2)).threads == 64
    assert T.ceildiv(7, 2) == 4


@tilelang.jit
def scaled_sum(A, block: int = 64, dtype: T.dtype = T.float16, accum_dtype: T.dtype = T.float):
    """Row sums of a (M, N) tensor in accum_dtype (TileLang's gemv-style signature)."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    S = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        acc = T.alloc_fragment((block,), accum_dtype)
        T.clear(acc)
        for k in T.serial(N):
            for i in T.Parallel(block):
                acc[i] += T.cast(A[bx * block + i, k], T.float)
        T.copy(acc, S[bx * block])
    return S


@pytest.mark.parametrize("dtype", ["float16", "float32", T.half, T.float])
def test_dtype_names_as_program_parameters(dtype):
    a = torch.randn(64, 48).to(getattr(torch, dtype))
    s = scaled_sum(a, dtype=dtype)
    torch.testing.assert_close(s.float(), a.float().sum(1), rtol=2e-3, atol=2e-3)


@tilelang.jit
def masked_fill(X, Mask, value: float = 0.0, block: int = 128):
    """``X[i]`` where ``Mask[i]``, else ``value``: a bool tensor and a bool tile."""
    N = T.const("N")
    X: T.Tensor((N,), T.float)
    Mask: T.Tensor((N,), T.bool)
    Y = T.empty((N,), T.float)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        keep = T.alloc_fragment((block,), T.bool)
        for i in T.Parallel(block):
            keep[i] = Mask[bx * block + i]
        for i in T.Parallel(block):
            Y[bx * block + i] = T.if_then_else(keep[i], X[bx * block + i], value)
    return Y


def test_t_bool_tensors_and_tiles():
    x = torch.randn(256)
    mask = torch.rand(256) > 0.5
    y = masked_fill(x, mask, value=-1.0)
    torch.testing.assert_close(y, torch.where(mask, x, torch.full_like(x, -1.0)))


def test_t_bool_kernel_assembles(ptxas):
    for arch in ("sm_80", "sm_90a"):
        ptxas(masked_fill.compile(N=256, value=-1.0, arch=arch).get_kernel_source(), arch)


# -- torch dtypes where TileLang takes a dtype ---------------------------------------------
def cast_iota(dtype, vec: int):
    """``A[i] = i + 1`` cast to ``dtype``, a torch dtype the kernel reads by closure (TileLang's
    vectorize tests parametrize over torch dtypes this way)."""
    @T.prim_func
    def main(A: T.Tensor[(64,), dtype]):
        with T.Kernel(1, threads=64):
            staged = T.alloc_shared((64,), dtype)
            T.copy(A, staged)
            for i in T.vectorized(vec):
                staged[i] = T.cast(i + 1, dtype)
            T.copy(staged, A)
    return main


TORCH_DTYPES = [torch.uint8, torch.int8, torch.int64, torch.float16, torch.bfloat16,
                torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_torch_dtypes_read_by_the_kernel_body(dtype):
    a = torch.zeros(64, dtype=dtype)
    tilelang.compile(cast_iota(dtype, 4), target="sim")(a)
    expect = torch.zeros(64, dtype=dtype)
    expect[:4] = torch.arange(1, 5).to(dtype)
    assert torch.equal(a.float(), expect.float())


def test_torch_dtypes_read_by_the_kernel_body_assemble(ptxas):
    for dtype, arch in ((torch.uint8, "sm_80"), (torch.bfloat16, "sm_80"),
                        (torch.uint8, "sm_90a"), (torch.float8_e4m3fn, "sm_90a")):
        kernel = tilelang.compile(cast_iota(dtype, 4), target=f"cuda -arch={arch}")
        ptxas(kernel.get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_torch_dtypes_read_by_the_kernel_body_on_gpu(dtype):
    a = torch.zeros(64, dtype=dtype, device="cuda")
    tilelang.compile(cast_iota(dtype, 8))(a)
    sim = torch.zeros(64, dtype=dtype)
    tilelang.compile(cast_iota(dtype, 8), target="sim")(sim)
    assert torch.equal(a.cpu().float(), sim.float())
    assert torch.equal(a[:8].cpu().float(), torch.arange(1, 9).to(dtype).float())


# -- T.tfloat32: float32 storage, tf32 gemm ------------------------------------------------
@tilelang.jit(out_idx=[2])
def tf32_matmul(M, N, K, block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.tfloat32), B: T.Tensor((K, N), T.tfloat32),
             C: T.Tensor((M, N), T.float)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.tfloat32)
            B_s = T.alloc_shared((block_K, block_N), T.tfloat32)
            C_f = T.alloc_fragment((block_M, block_N), T.float)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return main


def _tf32(x):
    """float32 rounded to tf32 (10 mantissa bits, to nearest)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def test_tfloat32_is_float32_storage_with_a_tf32_gemm():
    assert T.tfloat32 is T.float32 and T.tfloat32.as_torch() is torch.float32
    a, b = torch.randn(64, 96), torch.randn(96, 64)
    c = tf32_matmul(64, 64, 96)(a, b)
    ref = _tf32(a).double() @ _tf32(b).double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-4)


def test_tfloat32_gemm_assembles_on_tf32_mma(ptxas):
    kernel = tf32_matmul(128, 128, 128)
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch)
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_tfloat32_gemm_on_gpu():
    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 256, device="cuda")
    c = tf32_matmul(256, 256, 512)(a, b)
    ref = _tf32(a).double() @ _tf32(b).double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-4, atol=1e-3)


# -- T.Var ---------------------------------------------------------------------------------
def test_t_var_is_the_class_of_shape_symbols():
    m = T.dynamic("m")
    M, N = T.const("M, N")
    assert all(isinstance(s, T.Var) for s in (m, M, N))
    assert not isinstance(128, T.Var)
    v = T.Var("n", T.int32)
    assert isinstance(v, T.Var) and v.name == "n" and v.dtype == "int32" and v.dynamic


@tilelang.jit(out_idx=[1])
def doubled(block=128):
    n = T.Var("n", T.int32)

    @T.prim_func
    def main(X: T.Tensor((n,), T.float), Y: T.Tensor((n,), T.float)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * 2.0
    return main


@pytest.mark.parametrize("n", [100, 300])
def test_t_var_as_a_run_time_extent(n):
    kernel = doubled()
    x = torch.randn(n)
    torch.testing.assert_close(kernel(x), x * 2)


def test_symbolic_extents_tell_themselves_apart_as_tilelang_tests_do():
    # TileLang's tests build reference shapes this way
    kernel = doubled()
    shape = [d if not isinstance(d, T.Var) else 64 for d in kernel.prim.annotations["X"].shape]
    assert shape == [64]


@pytest.mark.gpu
def test_vocabulary_programs_on_gpu():
    a = torch.randn(1000, 77, device="cuda").half()
    torch.testing.assert_close(scaled_sum(a, dtype="float16").float(), a.float().sum(1),
                               rtol=2e-3, atol=2e-2)
    x = torch.randn(5000, device="cuda")
    mask = torch.rand(5000, device="cuda") > 0.5
    torch.testing.assert_close(masked_fill(x, mask, value=-1.0),
                               torch.where(mask, x, torch.full_like(x, -1.0)))
    torch.testing.assert_close(doubled()(x), x * 2)


def test_barrier_wait_and_arrive_are_the_mbarrier_operations():
    """TileLang's sugar (its builtin.py): T.barrier_wait(b, parity) is
    T.mbarrier_wait_parity, T.barrier_arrive(b) is T.mbarrier_arrive; the front end
    recognizes them by identity, so every rule of the T.ws forms applies to them."""
    assert T.barrier_wait is T.mbarrier_wait_parity
    assert T.barrier_arrive is T.mbarrier_arrive


def test_a_torch_dtype_tilejit_lacks_is_named():
    dtype = torch.complex64

    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = T.cast(A[i], dtype)
    with pytest.raises(tilelang.CompileError, match="torch.complex64 is not a dtype tilejit "
                                                    "has: unknown dtype 'complex64'"):
        tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()


def test_dtype_calls_make_typed_values_and_declarations():
    assert T.int32(0x7FFFFFFF) == 2 ** 31 - 1 and T.int32(-2 ** 31).dtype == np.int32
    assert T.uint64(0xFFFFFFFFFFFFFFFF) == 2 ** 64 - 1
    a = T.uint32()                                  # TileLang's declaration: zero here
    assert a.dtype == np.uint32 and a == 0 and (a & 0xFFFFFFFF) == 0

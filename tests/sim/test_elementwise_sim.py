"""The foundation's kernels in the simulator (the executable definition)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from elementwise_2d import scale_bias
from vector_add import relu, vector_add

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [1, 255, 1024, 1000, 4097])
def test_vector_add_sizes(rng, n):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.full_like(a, np.nan)
    vector_add(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=0, atol=0)


def test_relu(rng):
    x = rng.standard_normal(3000).astype(np.float16)
    y = np.full_like(x, np.nan)
    relu(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


NUMPY_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
                "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_vector_add_each_dtype(rng, dtype):
    a = (rng.standard_normal(777) * 20).astype(dtype)
    b = (rng.standard_normal(777) * 20).astype(dtype)
    c = np.zeros_like(a)
    vector_add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_bfloat16_torch_cpu():
    a = torch.randn(1000, dtype=torch.bfloat16)
    b = torch.randn(1000, dtype=torch.bfloat16)
    c = torch.zeros_like(a)
    vector_add(a, b, c)
    assert torch.equal(c, a + b)


def test_bool_tensors():
    @tilejit.kernel
    def logical_and(A, B, C):
        N = A.shape[0]
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                if k < N:
                    C[k] = A[k] and B[k]

    a = np.random.default_rng(0).random(300) > 0.5
    b = np.random.default_rng(1).random(300) > 0.5
    c = np.zeros_like(a)
    logical_and(a, b, c)
    np.testing.assert_array_equal(c, a & b)


def test_transposed_input_2d(rng):
    x = rng.standard_normal((100, 70)).astype(np.float32).T  # (70, 100), strides (1, 70)
    bias = rng.standard_normal(100).astype(np.float32)
    y = np.zeros((70, 100), np.float32)
    scale_bias(x, bias, y, 0.5)
    np.testing.assert_allclose(y, x * np.float32(0.5) + bias, rtol=1e-6)


def test_runtime_scalar_and_torch_cpu():
    x = torch.randn(33, 65)
    bias = torch.randn(65)
    y = torch.empty(33, 65)
    scale_bias(x, bias, y, 2.0)
    torch.testing.assert_close(y, x * 2.0 + bias)
    before = len(scale_bias._cache)
    scale_bias(x, bias, y, -1.25)       # a run-time scalar: no new specialization
    torch.testing.assert_close(y, x * -1.25 + bias)
    assert len(scale_bias._cache) == before


def test_constexpr_respecializes(rng):
    a = rng.standard_normal(5000).astype(np.float32)
    c = np.zeros_like(a)
    before = len(vector_add._cache)
    vector_add(a, a, c, block=512)
    vector_add(a, a, c, block=2048)
    vector_add(a, a, c, block=2048)
    assert len(vector_add._cache) == before + 2
    np.testing.assert_array_equal(c, a + a)


def test_parallel_2d_and_if_then_else(rng):
    @tilejit.kernel
    def masked_copy(X, Y, fill, block: T.constexpr = 16):
        M, N = X.shape
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=64) as (bx, by):
            for i, j in T.Parallel(block, block):
                r = by * block + i
                c = bx * block + j
                if r < M and c < N:
                    Y[r, c] = T.if_then_else(X[r, c] > 0, X[r, c], fill)

    x = rng.standard_normal((37, 41)).astype(np.float32)
    y = np.zeros_like(x)
    masked_copy(x, y, -7.0)
    np.testing.assert_array_equal(y, np.where(x > 0, x, np.float32(-7)))


def test_if_then_else_guards_the_load(rng):
    @tilejit.kernel
    def padded(X, Y):
        N = X.shape[0]
        with T.Kernel(T.ceildiv(Y.shape[0], 64), threads=64) as bx:
            for i in T.Parallel(64):
                k = bx * 64 + i
                Y[k] = T.if_then_else(k < N, X[k], 0.0)

    x = rng.standard_normal(100).astype(np.float32)
    y = np.full(128, np.nan, np.float32)
    padded(x, y)
    np.testing.assert_array_equal(y, np.concatenate([x, np.zeros(28, np.float32)]))


def test_serial_loop_and_scalar_fallback(rng):
    @tilejit.kernel
    def row_prefix(X, Y, K: T.constexpr = 8):
        M = X.shape[0]
        with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
            for i in T.Parallel(32):
                r = bx * 32 + i
                if r < M:
                    acc = 0.0
                    for k in T.serial(K):
                        acc += X[r, k]
                        if acc > 100.0:
                            break
                    Y[r] = acc

    x = rng.standard_normal((50, 8)).astype(np.float32)
    y = np.zeros(50, np.float32)
    row_prefix(x, y)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_grid_3d(rng):
    @tilejit.kernel
    def add3(X, Y):
        B, M, N = X.shape
        with T.Kernel(N, M, B, threads=32) as (bx, by, bz):
            for i in T.Parallel(1):
                Y[bz, by, bx] = X[bz, by, bx] + bz * 100 + by * 10 + bx + i

    x = rng.standard_normal((2, 3, 4)).astype(np.float64)
    y = np.zeros_like(x)
    add3(x, y)
    ref = x + np.add.outer(np.add.outer(np.arange(2) * 100, np.arange(3) * 10), np.arange(4))
    np.testing.assert_allclose(y, ref)


def test_out_of_bounds_names_file_and_line(rng):
    @tilejit.kernel
    def unguarded(A, B):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i]  # OOB-LINE

    a = np.zeros(200, np.float32)
    b = np.zeros(200, np.float32)
    with pytest.raises(IndexError) as info:
        unguarded(a, b)
    msg = str(info.value)
    assert __file__ in msg and "OOB-LINE" in msg and "out of bounds" in msg


def test_sim_with_tilejit_target_env(monkeypatch, rng):
    monkeypatch.setenv("TILEJIT_TARGET", "sim")
    a = rng.standard_normal(10).astype(np.float32)
    c = np.zeros_like(a)
    vector_add(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_simulator_speed_2_20():
    import time
    a = np.ones(1 << 20, np.float32)
    c = np.zeros_like(a)
    vector_add(a, a, c)   # compile (type check) once
    t = time.perf_counter()
    vector_add(a, a, c)
    assert time.perf_counter() - t < 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_simulator_takes_gpu_tensors(dtype):
    """TILEJIT_TARGET=sim on a GPU machine, as TileLang's tests are run in the simulator
    there: CUDA tensors are simulated on host copies and the outputs written back (a
    bfloat16 one through its float32 copy); the same numbers as the GPU's launch."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import importlib
    softmax = importlib.import_module("softmax").softmax
    simulated = tilejit.kernel(softmax.func, target="sim")
    x = torch.randn(37, 1024, device="cuda").to(getattr(torch, dtype))
    y_sim, y_gpu = torch.empty_like(x), torch.empty_like(x)
    simulated(x, y_sim)
    softmax(x, y_gpu)
    torch.cuda.synchronize()
    assert y_sim.device.type == "cuda"
    ref = torch.softmax(x.double(), dim=1)
    tol = 1e-5 if dtype == "float32" else 1e-2
    torch.testing.assert_close(y_sim.double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(y_sim, y_gpu, rtol=tol, atol=tol)


def _iota(n):
    @T.prim_func
    def main(out: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                out[bx * 64 + i] = bx * 64 + i
    return main


@pytest.mark.gpu
def test_a_kernel_without_inputs_simulated_puts_its_outputs_on_the_device(monkeypatch):
    """TileLang's `kernel()` of a fill, simulated on a GPU machine (TILEJIT_TARGET=sim):
    the output where the GPU's launch puts it, as TileLang's tests compare it there."""
    monkeypatch.setenv("TILEJIT_TARGET", "sim")
    out = tilejit.compile(_iota(256), out_idx=[0])()
    assert out.device.type == "cuda"
    assert torch.equal(out.cpu(), torch.arange(256, dtype=torch.int32))
    monkeypatch.delenv("TILEJIT_TARGET")
    assert torch.equal(tilejit.compile(_iota(256), out_idx=[0])(), out)


def _scaled(n, block=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2
    return main


@pytest.mark.gpu
def test_autotune_simulated_on_a_gpu_machine_takes_the_first_config(monkeypatch):
    """Under TILEJIT_TARGET=sim with CUDA inputs the autotuner simulates each config (no
    timing: a simulated launch has none) and keeps the first that runs."""
    import tilejit as tilelang
    monkeypatch.setenv("TILEJIT_TARGET", "sim")

    @tilelang.autotune(configs=[{"block": 32}, {"block": 64}])
    @tilelang.jit(out_idx=[1])
    def scaled(n, block=128):
        return _scaled(n, block)

    a = torch.randn(256, device="cuda")
    b = scaled(256)(a)
    assert b.device.type == "cuda"
    torch.testing.assert_close(b, a * 2)


@pytest.mark.gpu
def test_eager_autotune_simulated_with_device_inputs(monkeypatch):
    """TileLang's eager autotune test under TILEJIT_TARGET=sim: its inputs on the device
    (set_autotune_inputs) had made the tuner time simulated launches with the GPU's
    events, and every config failed."""
    import tilejit as tilelang
    from tilejit.autotuner import set_autotune_inputs
    monkeypatch.setenv("TILEJIT_TARGET", "sim")

    @tilelang.autotune(configs=[{"block": 32}, {"block": 64}])
    @tilelang.jit
    def eager(A, block=128):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        B = T.empty((n,), "float32")
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2
        return B

    a = torch.randn(256).cuda()
    with set_autotune_inputs([a]):
        b = eager(a)
    assert b.device.type == "cuda"
    torch.testing.assert_close(b, a * 2)

"""T.Parallel loops nested in one another (TileLang's loop-nest rules): perfectly nested
ones are one loop over the rectangle (each used to spread its own iterations over the
block's threads, so a thread ran only the pairs on the diagonal on the GPU while the
simulator ran them all); a T.Parallel under statements, an `if` or a serial loop inside
another, a T.Pipelined loop or a tile operation in a T.Parallel body are refused with a
LoopNestError (a ValueError, as TileLang raises it) by the simulator and the compiler
alike. In simulation against numpy, the device program and PTX checked here, on the GPU
against torch and the simulator."""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError, LoopNestError


@tilejit.kernel
def two_deep(A, B, block: T.constexpr = 16):
    with T.Kernel(1, threads=256):
        for i in T.Parallel(A.shape[0] // block):
            for j in T.Parallel(block):
                B[i * block + j] = A[i * block + j] + 1.0


@tilejit.kernel
def three_deep_with_a_pair(A, B, b1: T.constexpr = 8, b2: T.constexpr = 2):
    """The outer loop over a pair of indices, the two inner ones over one each."""
    with T.Kernel(1, threads=64):
        for h, i in T.Parallel(2, A.shape[0] // (2 * b1 * b2)):
            for j in T.Parallel(b1):
                for k in T.Parallel(b2):
                    n = ((h * (A.shape[0] // (2 * b1 * b2)) + i) * b1 + j) * b2 + k
                    B[n] = A[n] * 2.0


@tilejit.kernel
def into_a_fragment(A, B, m: T.constexpr = 32, n: T.constexpr = 64):
    """Nested loops over a fragment's two dimensions, as one T.Parallel(m, n) would be."""
    with T.Kernel(1, threads=128):
        f = T.alloc_fragment((m, n), T.float32)
        for i in T.Parallel(m):
            for j in T.Parallel(n):
                f[i, j] = A[i, j] * 3.0
        T.copy(f, B)


@tilejit.kernel
def serial_between(A, B, block: T.constexpr = 16):
    with T.Kernel(1, threads=256):
        for i in T.Parallel(A.shape[0] // block):
            for j in T.serial(block // 2):
                for k in T.Parallel(2):
                    B[i * block + j * 2 + k] = A[i * block + j * 2 + k]


@tilejit.kernel
def statement_before(A, B, block: T.constexpr = 16):
    with T.Kernel(1, threads=256):
        for i in T.Parallel(A.shape[0] // block):
            B[i] = 0.0
            for j in T.Parallel(block):
                B[i * block + j] = A[i * block + j] + 1.0


@tilejit.kernel
def triangular(A, B):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(8):
            for j in T.Parallel(i):
                B[i * 8 + j] = A[i * 8 + j]


@tilejit.kernel
def gemm_in_a_parallel(A, B, C):
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 32), T.float16)
        b = T.alloc_shared((32, 64), T.float16)
        c = T.alloc_fragment((64, 64), T.float32)
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        for _ in T.Parallel(1):
            T.gemm(a, b, c)
        T.copy(c, C)


@tilejit.kernel
def pipeline_in_a_parallel(A, B):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((32,), T.float32)
        for _ in T.Parallel(1):
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 32], s)
                T.copy(s, B[k * 32])


@tilejit.kernel
def serial_and_parallel_mixes(A, B, C, block: T.constexpr = 16):
    """Allowed: a T.Parallel in a serial loop, a serial loop in a T.Parallel, and an
    element's atomic in nested T.Parallel loops."""
    with T.Kernel(1, threads=256):
        for i in T.serial(A.shape[0] // block):
            for j in T.Parallel(block):
                B[i * block + j] = A[i * block + j] + 1.0
        for i in T.Parallel(A.shape[0] // block):
            for j in T.Parallel(block):
                T.atomic_add(C[i * block + j], 1.0)
        for i in T.Parallel(A.shape[0] // block):
            for j in T.serial(block):
                T.atomic_add(C[i * block + j], A[i * block + j])


def _row(B, A, i, block):
    for j in T.Parallel(block):
        B[i * block + j] = A[i * block + j] + 1.0


@T.macro
def _row_macro(B, A, i, block):
    for j in T.Parallel(block):
        B[i * block + j] = A[i * block + j] + 1.0


@tilejit.kernel
def through_a_helper(A, B, block: T.constexpr = 16):
    with T.Kernel(1, threads=256):
        for i in T.Parallel(A.shape[0] // block):
            _row(B, A, i, block)


@tilejit.kernel
def through_a_macro(A, B, block: T.constexpr = 16):
    with T.Kernel(1, threads=256):
        for i in T.Parallel(A.shape[0] // block):
            _row_macro(B, A, i, block)


def _line(text, path=__file__):
    return next(n for n, src in enumerate(open(path), 1) if text in src)


def _data(n=256, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_perfectly_nested_loops_run_every_pair():
    a = _data()
    b = np.zeros_like(a)
    two_deep(a, b)
    np.testing.assert_array_equal(b, a + 1.0)
    b = np.zeros_like(a)
    three_deep_with_a_pair(a, b)
    np.testing.assert_array_equal(b, a * 2.0)
    a2 = _data(32 * 64).reshape(32, 64)
    b2 = np.zeros_like(a2)
    into_a_fragment(a2, b2)
    np.testing.assert_array_equal(b2, a2 * 3.0)


def test_serial_and_parallel_loops_mix():
    a = _data()
    b, c = np.zeros_like(a), np.zeros_like(a)
    serial_and_parallel_mixes(a, b, c)
    np.testing.assert_array_equal(b, a + 1.0)
    np.testing.assert_allclose(c, a + 1.0, rtol=1e-6)


def _device_program(kernel, tensors, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    kernel.compile(*tensors, target="cuda", arch="sm_90a")
    (program,) = tmp_path.glob("*/*_device_program.py")
    return program.read_text()


def test_the_device_program_has_one_loop_over_the_rectangle(tmp_path, monkeypatch):
    a = _data()
    program = _device_program(three_deep_with_a_pair, (a, a.copy()), tmp_path, monkeypatch)
    assert program.count("T.Parallel(") == 1
    assert "for h, i, j, k in T.Parallel(2, " in program


@pytest.mark.parametrize("kernel, message", [
    (serial_between, "a T.Parallel inside the T.Parallel at line .* that is not its whole"),
    (statement_before, "a T.Parallel inside the T.Parallel at line .* that is not its whole"),
    (triangular, r"extents read the indices of the T.Parallel around it \(i\)"),
])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_other_nests_are_refused_at_their_line(kernel, message, target):
    a = _data()
    with pytest.raises(LoopNestError, match=message) as info:
        if target == "sim":
            kernel(a, a.copy())
        else:
            kernel.compile(a, a.copy(), target="cuda", arch="sm_90a")
    assert isinstance(info.value, ValueError) and isinstance(info.value, CompileError)
    assert "for " in str(info.value).splitlines()[-1]


@pytest.mark.parametrize("kernel, name", [(through_a_helper, "_row"),
                                          (through_a_macro, "_row_macro")])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_a_nest_through_a_helper_is_refused(kernel, name, target):
    """Found by a review: a helper holding a T.Parallel, called in one, compiled as a
    device function whose loop spread its own iterations: the diagonal only."""
    a = _data()
    with pytest.raises(LoopNestError, match=rf"{name}\(\) holds a T.Parallel loop and is "
                                            rf"called inside the T.Parallel at line"):
        if target == "sim":
            kernel(a, a.copy())
        else:
            kernel.compile(a, a.copy(), target="cuda", arch="sm_90a")


@tilejit.kernel
def carried_variable(X, Y):
    with T.Kernel(1, threads=64):
        s = T.alloc_var(T.float32)
        s = 0.0
        for i in T.Parallel(X.shape[0]):
            s = s + X[i]
        Y[0] = s


@tilejit.kernel
def carried_local(X, Y):
    with T.Kernel(1, threads=64):
        acc = T.alloc_local((1,), T.float32)
        acc[0] = 0.0
        for i in T.Parallel(X.shape[0]):
            acc[0] += X[i]
        Y[0] = acc[0]


@tilejit.kernel
def per_iteration_values(X, Y, n: T.constexpr = 4):
    """Allowed: a variable or an element set in the iteration before it is updated."""
    with T.Kernel(1, threads=64):
        best = T.alloc_local((1,), T.float32)
        for i in T.Parallel(X.shape[0]):
            s = T.alloc_var(T.float32)
            s = 0.0
            best[0] = -T.infinity(T.float32)
            for k in T.serial(n):
                s += X[i, k]
                best[0] = T.max(best[0], X[i, k])
            Y[i] = s + best[0]


@pytest.mark.parametrize("kernel, name", [(carried_variable, "s"), (carried_local, "acc")])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_a_value_carried_between_iterations_is_refused(kernel, name, target):
    """Found by a user-style fuzz: the simulator gave the last iteration's value (or the
    whole sum), the GPU a partial sum per thread, every thread storing its own."""
    x = _data(128)
    with pytest.raises(LoopNestError, match=rf"carries {name} from one iteration to the "
                                            rf"next"):
        if target == "sim":
            kernel(x, np.zeros(1, np.float32))
        else:
            kernel.compile(x, np.zeros(1, np.float32), target="cuda", arch="sm_90a")


def test_values_set_in_the_iteration_are_the_iterations_own():
    x = _data(64 * 4).reshape(64, 4)
    y = np.zeros(64, np.float32)
    per_iteration_values(x, y)
    np.testing.assert_allclose(y, x.sum(1) + x.max(1), rtol=1e-5)
    per_iteration_values.compile(x, y, target="cuda", arch="sm_90a")


def test_a_tile_operation_or_a_pipeline_in_a_parallel_is_refused():
    a = np.zeros((64, 32), np.float16)
    b = np.zeros((32, 64), np.float16)
    with pytest.raises(LoopNestError, match="T.gemm inside the T.Parallel at line"):
        gemm_in_a_parallel(a, b, np.zeros((64, 64), np.float32))
    x = _data(128)
    with pytest.raises(LoopNestError, match="a T.Pipelined loop inside the T.Parallel"):
        pipeline_in_a_parallel.compile(x, x.copy(), target="cuda", arch="sm_90a")


@tilejit.kernel
def region_copy_in_a_parallel(A, B):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((8, 32), T.float32)
        for i in T.Parallel(8):
            T.copy(A[i, 0:32], s[i, 0:32])
        for i, j in T.Parallel(8, 32):
            T.copy(A[i, j], s[i, j])             # one element each: allowed
        T.copy(s, B)


def test_a_region_copy_in_a_parallel_is_refused_in_both():
    """It compiled for the GPU (meaning unchecked) and was an internal TypeError in the
    simulator: a region is the whole block's to copy, as TileLang's element-wise body."""
    x = np.zeros((8, 32), np.float32)
    for run in (lambda: region_copy_in_a_parallel(x, x.copy()),
                lambda: region_copy_in_a_parallel.compile(x, x.copy(), target="cuda",
                                                          arch="sm_90a")):
        with pytest.raises(LoopNestError, match=r"a T.copy of a region inside the T.Parallel "
                                                r"at line \d+: a region's copy is the whole "
                                                r"block's work") as e:
            run()
        assert "T.copy(A[i, 0:32], s[i, 0:32])" in str(e.value)


@tilejit.kernel
def local_stored_by_the_loop(X, Y):
    """A thread's own array indexed by the iterations that are spread over the threads:
    each thread's copy would hold only its iterations' elements, where the simulator
    held one array with all of them (found against TileLang's local-index checker)."""
    n = X.shape[0]
    with T.Kernel(1, threads=n):
        local = T.alloc_local((n,), T.float32)
        for i in T.Parallel(n):
            local[i] = X[i]                       # stored by the iteration's index
        for k in T.serial(n):
            Y[k] = local[k]


@tilejit.kernel
def local_read_by_the_loop(X, Y):
    n = X.shape[0]
    with T.Kernel(1, threads=n):
        local = T.alloc_local((n,), T.float32)
        for k in T.serial(n):
            local[k] = X[k]
        for i in T.Parallel(n):
            Y[i] = local[i]                       # read by the iteration's index


@tilejit.kernel
def local_through_a_name(X, Y):
    n = X.shape[0]
    with T.Kernel(1, threads=n):
        local = T.alloc_local((n,), T.float32)
        for i, j in T.Parallel(n // 4, 4):
            flat = i * 4 + j
            local[flat] = X[flat]                 # through a name computed from them
        Y[0] = local[0]


@tilejit.kernel
def local_at_the_threads_own_indices(X, Y):
    """Allowed: an index every iteration shares, or an inner serial loop's."""
    n = X.shape[0]
    with T.Kernel(1, threads=32):
        scale = T.alloc_local((1,), T.float32)
        scale[0] = 2.0
        scratch = T.alloc_local((4,), T.float32)
        for i in T.Parallel(n):
            for lane in T.vectorized(4):
                scratch[lane] = X[i] + lane
            Y[i] = (scratch[0] + scratch[3]) * scale[0]


@pytest.mark.parametrize("kernel, index, line", [
    (local_stored_by_the_loop, "T.Parallel loop variable `i`", "stored by the iteration's"),
    (local_read_by_the_loop, "T.Parallel loop variable `i`", "read by the iteration's index"),
    (local_through_a_name, "`flat`, computed from T.Parallel loop variable `i, j`",
     "through a name computed")])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_a_local_indexed_by_the_loop_is_refused(kernel, index, line, target):
    x = _data(32)
    with pytest.raises(LoopNestError, match=rf"Local buffer `local` is indexed by "
                                            rf"{re.escape(index)}") as info:
        if target == "sim":
            kernel(x, np.zeros_like(x))
        else:
            kernel.compile(x, np.zeros_like(x), target="cuda", arch="sm_90a")
    assert isinstance(info.value, ValueError)
    assert f"line {_line(line)}" in str(info.value)


def test_a_local_at_indices_the_iterations_share_runs():
    x = _data(64)
    y = np.zeros_like(x)
    local_at_the_threads_own_indices(x, y)
    np.testing.assert_allclose(y, (2 * x.astype(np.float64) + 3) * 2, rtol=1e-6)
    local_at_the_threads_own_indices.compile(x, y, target="cuda", arch="sm_90a")


def test_tilelang_jit_refuses_it_when_called():
    """TileLang's @tilelang.jit compiles when the program is made: the refusal comes
    there, not at the first launch."""
    import tilejit as tilelang

    @tilelang.jit
    def program(n=32):
        @T.prim_func
        def main(Y: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=n):
                local = T.alloc_local((n,), T.float32)
                for i in T.Parallel(n):
                    local[i] = 1.0
                for i in T.Parallel(n):
                    Y[i] = local[0]
        return main

    with pytest.raises(LoopNestError, match="Local buffer `local` is indexed by"):
        program()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = _data()
    for kernel, args in ((two_deep, (a, a.copy())), (three_deep_with_a_pair, (a, a.copy())),
                         (serial_and_parallel_mixes, (a, a.copy(), a.copy()))):
        ptxas(kernel.compile(*args, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_nested_loops_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = _data(512, seed=1)
    for kernel, ref in ((two_deep, a.astype(np.float64) + 1.0),
                        (three_deep_with_a_pair, a.astype(np.float64) * 2.0)):
        out = torch.zeros(512, device="cuda")
        kernel(torch.from_numpy(a).cuda(), out)
        sim = np.zeros_like(a)
        kernel(a, sim)
        np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6)
        np.testing.assert_array_equal(out.cpu().numpy(), sim)
    a2 = _data(32 * 64, seed=2).reshape(32, 64)
    out = torch.zeros(32, 64, device="cuda")
    into_a_fragment(torch.from_numpy(a2).cuda(), out)
    np.testing.assert_array_equal(out.cpu().numpy(), a2 * 3.0)
    b, c = torch.zeros(512, device="cuda"), torch.zeros(512, device="cuda")
    serial_and_parallel_mixes(torch.from_numpy(a).cuda(), b, c)
    np.testing.assert_array_equal(b.cpu().numpy(), a + 1.0)
    np.testing.assert_allclose(c.cpu().numpy(), a + 1.0, rtol=1e-6)


@tilejit.kernel
def local_at_a_rebound_name(X, Y):
    """A name computed from the loop's index, then bound again (an inner serial loop's
    variable, a constant) before it indexes a local: the thread's own index, allowed
    (found by a review: the check followed the name, not its binding)."""
    n = X.shape[0]
    with T.Kernel(1, threads=32):
        scratch = T.alloc_local((4,), T.float32)
        for i in T.Parallel(n):
            k = i % 4
            Y[i] = X[i] + k
            for k in T.serial(4):
                scratch[k] = X[i] * k
            t = i + 1
            Y[i] = Y[i] * t
            t = 0
            Y[i] = Y[i] + scratch[3] + scratch[t]


def test_a_name_bound_again_is_not_the_loops_index():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    local_at_a_rebound_name(x, y)
    i = np.arange(64, dtype=np.float64)
    np.testing.assert_allclose(y, (i + i % 4) * (i + 1) + 3 * i, rtol=1e-6)
    local_at_a_rebound_name.compile(x, y, target="cuda", arch="sm_90a")

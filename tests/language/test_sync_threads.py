"""T.sync_threads(), as TileLang's per-thread code writes it (DeepSeek's top-k selector,
the block-causal attention): the block's barrier (one of the consumers' in a
warp-specialized kernel), checked to be reached by every thread; in simulation, in PTX
assembled by ptxas, and with ``-m gpu`` against torch and the simulator."""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def reverse_in_shared(A, B):
    """Each thread writes its element to shared memory and reads its mirror's."""
    with T.Kernel(A.shape[0] // 128, threads=128) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), T.float32)
        S[tx] = A[bx * 128 + tx]
        T.sync_threads()
        B[bx * 128 + tx] = S[127 - tx]


@tilejit.kernel
def barrier_without_shared(A):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        A[tx] = A[tx] + 1.0
        T.sync_threads()


@tilejit.kernel
def barrier_in_a_divergent_branch(A):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        half = tx < 32
        if half:
            T.sync_threads()
        A[tx] = 1.0


@tilejit.kernel
def named_barrier(A):
    with T.Kernel(1, threads=64) as bx:
        T.sync_threads(3, 48)
        A[0] = 1.0


def test_in_simulation():
    a = np.arange(512, dtype=np.float32)
    b = np.zeros_like(a)
    reverse_in_shared(a, b)
    np.testing.assert_array_equal(b, a.reshape(4, 128)[:, ::-1].reshape(-1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_has_the_barrier(arch, ptxas):
    a = np.zeros(512, np.float32)
    ptx = reverse_in_shared.compile(a, a.copy(), target="cuda", arch=arch).ptx
    assert len(re.findall(r"bar\.sync\s+0;", ptx)) >= 1
    ptxas(ptx, arch)
    ptx = barrier_without_shared.compile(np.zeros(64, np.float32), target="cuda",
                                         arch=arch).ptx
    assert re.search(r"bar\.sync\s+0;", ptx)
    ptxas(ptx, arch)


def test_a_barrier_some_threads_skip_is_an_error():
    with pytest.raises(CompileError, match=r"T.sync_threads\(\) inside a branch or loop "
                                           r"that depends on the thread index") as e:
        barrier_in_a_divergent_branch.compile(np.zeros(64, np.float32), target="cuda",
                                              arch="sm_90a")
    assert "T.sync_threads()" in str(e.value)
    with pytest.raises(CompileError, match="depends on the thread index"):
        barrier_in_a_divergent_branch(np.zeros(64, np.float32))     # the simulator too
    # a named barrier may be reached by some threads (test_named_barriers.py), in warps
    with pytest.raises(CompileError, match=r"arrive_count must be a multiple of 32"):
        named_barrier.compile(np.zeros(64, np.float32), target="cuda", arch="sm_90a")


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.randn(4096)
    b = torch.zeros(4096, device="cuda")
    reverse_in_shared(a.cuda(), b)
    torch.testing.assert_close(b.cpu(), a.reshape(32, 128).flip(1).reshape(-1), rtol=0,
                               atol=0)
    sim = np.zeros(4096, np.float32)
    reverse_in_shared(a.numpy(), sim)
    np.testing.assert_array_equal(b.cpu().numpy(), sim)


@tilejit.kernel
def reverse_through_tvm_storage_sync(A, B):
    """TVM's spelling of the barrier (KernelBench TileLang solutions write it)."""
    with T.Kernel(A.shape[0] // 128, threads=128) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), T.float32)
        S[tx] = A[bx * 128 + tx]
        T.tvm_storage_sync("shared")
        B[bx * 128 + tx] = S[127 - tx]


GRID = "global"


@tilejit.kernel
def grid_storage_sync(A):
    with T.Kernel(1, threads=128) as bx:
        A[0] = 1.0
        T.tvm_storage_sync(GRID)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tvm_storage_sync_is_the_blocks_barrier(arch, ptxas):
    a = np.arange(512, dtype=np.float32)
    b = np.zeros_like(a)
    reverse_through_tvm_storage_sync(a, b)
    np.testing.assert_array_equal(b, a.reshape(4, 128)[:, ::-1].reshape(-1))
    ptx = reverse_through_tvm_storage_sync.compile(a, b, target="cuda", arch=arch).ptx
    assert re.search(r"bar\.sync\s+0;", ptx)
    ptxas(ptx, arch)
    with pytest.raises(CompileError, match=r"T.tvm_storage_sync\(scope\): expected \"shared\""
                                           r".*got T.tvm_storage_sync\(GRID\)"):
        grid_storage_sync(a)


@pytest.mark.gpu
def test_tvm_storage_sync_on_the_gpu():
    import torch
    a = torch.randn(4096)
    b = torch.zeros(4096, device="cuda")
    reverse_through_tvm_storage_sync(a.cuda(), b)
    torch.testing.assert_close(b.cpu(), a.reshape(32, 128).flip(1).reshape(-1), rtol=0,
                               atol=0)


@tilejit.kernel
def barrier_after_a_divergent_continue(A):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        for k in T.serial(4):
            if tx >= 32 + k:
                continue
            A[tx] = A[tx] + 1.0
            T.sync_threads()


@tilejit.kernel
def barrier_in_a_per_thread_loop(A):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        for _j in T.serial(tx // 32 + 1):
            T.sync_threads()
        A[tx] = 1.0


@tilejit.kernel
def barrier_in_a_parallel_loop(A):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), T.float32)
        for i in T.Parallel(64):
            S[i] = A[i]
            if i % 2 == 0:
                T.sync_threads()
        T.copy(S, A)


@pytest.mark.parametrize("kernel,match", [
    (barrier_after_a_divergent_continue, "depends on the thread index"),
    (barrier_in_a_per_thread_loop, "depends on the thread index"),
    (barrier_in_a_parallel_loop, "inside a T.Parallel loop")])
def test_barriers_not_every_thread_reaches_are_errors(kernel, match):
    with pytest.raises(CompileError, match=match):
        kernel.compile(np.zeros(64, np.float32), target="cuda", arch="sm_90a")


@tilejit.kernel
def uniform_break_after_scattered_stores(X, Out, Count):
    """DeepSeek's top-k selector's shape: threads store at indices they computed
    (``Out[bx, pos] = i``, pos thread-dependent, each thread its own), then a loop leaves
    early on a value every thread reads alike from shared memory, with block barriers
    inside. The store does not make ``bx`` thread-dependent, nor does ``Out.shape`` read
    the stored elements."""
    n = Out.shape[1]
    with T.Kernel(2, threads=64) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((1,), T.int32)
        left = T.alloc_var(T.int32)
        pos = tx * 7 % n
        Out[bx, pos] = tx * 10 + bx
        left = n - 59
        for r in T.serial(4):
            if left <= 0:
                break
            T.sync_threads()
            if tx == 0:
                S[0] = left - 3
            T.sync_threads()
            left = S[0]
            Count[bx, r] = left


def _uniform_break_expected(n=64):
    out = np.zeros((2, n), np.int32)
    for b in range(2):
        for t in range(64):          # 7 is prime to 64: each thread its own position
            out[b, t * 7 % n] = t * 10 + b
    count = np.zeros((2, 4), np.int32)
    count[:, :2] = [2, -1]
    return out, count


def test_a_uniform_break_after_scattered_stores():
    x = np.zeros(4, np.float32)
    out, count = np.zeros((2, 64), np.int32), np.zeros((2, 4), np.int32)
    uniform_break_after_scattered_stores(x, out, count)
    want_out, want_count = _uniform_break_expected()
    np.testing.assert_array_equal(count, want_count)
    np.testing.assert_array_equal(out, want_out)
    for arch in ("sm_80", "sm_90a"):
        ptx = uniform_break_after_scattered_stores.compile(x, out, count, target="cuda",
                                                           arch=arch).ptx
        assert ptx.count("bar.sync") >= 2


@pytest.mark.gpu
def test_a_uniform_break_after_scattered_stores_on_the_gpu():
    import torch
    out = torch.zeros((2, 64), dtype=torch.int32, device="cuda")
    count = torch.zeros((2, 4), dtype=torch.int32, device="cuda")
    uniform_break_after_scattered_stores(torch.zeros(4, device="cuda"), out, count)
    torch.cuda.synchronize()
    want_out, want_count = _uniform_break_expected()
    np.testing.assert_array_equal(count.cpu().numpy(), want_count)
    np.testing.assert_array_equal(out.cpu().numpy(), want_out)


@tilejit.kernel
def barrier_after_a_store_at_the_thread_index(A):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        L = T.alloc_local((2,), T.int32)
        L[0] = 0
        L[1] = 0
        L[tx % 2] = 5                       # which element holds 5 depends on the thread
        for _k in T.serial(L[0]):
            T.sync_threads()
        A[tx] = 1.0


@tilejit.kernel
def barrier_after_an_atomics_return(A, N):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        old = T.atomic_add(N[0], 1, return_prev=True)     # each thread its own count
        for _k in T.serial(old):
            T.sync_threads()
        A[tx] = 1.0


def _shape_from_the_thread():
    @T.prim_func
    def main(table: T.Tensor([1], T.ptr), out: T.Tensor([1, 64], "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            src = T.make_tensor(table[bx], (tx + 1,), "float32")
            for _k in T.serial(src.shape[0]):               # the shape is the thread's
                T.sync_threads()
            out[bx, tx] = src[0]
    return main


@pytest.mark.parametrize("kernel, args", [
    (barrier_after_a_store_at_the_thread_index, (np.zeros(64, np.float32),)),
    (barrier_after_an_atomics_return, (np.zeros(64, np.float32), np.zeros(1, np.int32)))])
def test_thread_dependent_stores_and_atomics_keep_barriers_out(kernel, args):
    with pytest.raises(CompileError, match="depends on the thread index"):
        kernel.compile(*args, target="cuda", arch="sm_90a")


def test_a_shape_made_from_the_thread_index_keeps_barriers_out():
    with pytest.raises(CompileError, match="depends on the thread index"):
        tilejit.compile(_shape_from_the_thread()).get_kernel_source(arch="sm_90a")


# -- a barrier among a T.Parallel body's statements: the loop cut in two there ------------

@tilejit.kernel
def mirror_through_a_barrier_in_parallel(A, B):
    """Each iteration stores its element in shared memory, then (after the barrier)
    reads its mirror, another thread's; 256 iterations on 64 threads, four each, so
    without the cut a thread's later iterations would store after others had read."""
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((256,), T.float32)
        F = T.alloc_fragment((256,), T.float32)
        for i in T.Parallel(256):
            F[i] = A[i] * 2.0
            S[i] = F[i]
            T.sync_threads()
            B[i] = S[255 - i] + F[i]


def test_a_barrier_in_a_parallel_body_cuts_the_loop():
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    mirror_through_a_barrier_in_parallel(a, b)
    np.testing.assert_array_equal(b, 2 * a[::-1] + 2 * a)
    for arch in ("sm_80", "sm_90a"):
        ptx = mirror_through_a_barrier_in_parallel.compile(a, b, target="cuda",
                                                           arch=arch).ptx
        assert "bar.sync" in ptx


@pytest.mark.gpu
def test_a_barrier_in_a_parallel_body_cuts_the_loop_on_the_gpu():
    import torch
    a = torch.randn(256, device="cuda")
    b = torch.zeros_like(a)
    mirror_through_a_barrier_in_parallel(a, b)
    torch.cuda.synchronize()
    want = torch.zeros(256)
    tilejit.kernel(mirror_through_a_barrier_in_parallel.func, target="sim")(a.cpu(), want)
    a = a.cpu()
    torch.testing.assert_close(b.cpu(), (2 * a.double().flip(0) + 2 * a.double()).float())
    torch.testing.assert_close(b.cpu(), want)


@tilejit.kernel
def value_across_a_barrier(A, B):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), T.float32)
        for i in T.Parallel(64):
            v = A[i] + 1.0
            S[i] = v
            T.sync_threads()
            B[i] = S[63 - i] + v


@tilejit.kernel
def continue_before_a_barrier(A, B):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), T.float32)
        for i in T.Parallel(64):
            if A[i] < 0:
                continue
            S[i] = A[i]
            T.sync_threads()
            B[i] = S[63 - i]


@pytest.mark.parametrize("kernel, words, line", [
    (value_across_a_barrier, "`v` is set in this T.Parallel loop before its "
     "T.sync_threads()", "B[i] = S[63 - i] + v"),
    (continue_before_a_barrier, "`continue` before the T.sync_threads()", "continue")])
def test_what_a_cut_parallel_loop_cannot_carry_is_an_error(kernel, words, line):
    a = np.zeros(64, np.float32)
    want = next(n for n, src in enumerate(open(__file__), 1)
                if src.strip() == line and n > kernel.func.__code__.co_firstlineno)
    for run in (lambda: kernel(a, a.copy()),
                lambda: kernel.compile(a, a.copy(), target="cuda", arch="sm_90a")):
        with pytest.raises(CompileError) as e:
            run()
        assert words in str(e.value)
        assert e.value.lineno == want


@tilejit.kernel
def names_set_again_after_a_barrier(A, B):
    """Nothing crosses the cut: `v` is set again after the barrier before it is read, and
    `k` is each serial loop's own."""
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((64, 4), T.float32)
        for i in T.Parallel(64):
            v = A[i, 0] + 1.0
            for k in T.serial(4):
                S[i, k] = A[i, k] + v
            T.sync_threads()
            v = S[63 - i, 0]
            for k in T.serial(4):
                B[i, k] = S[63 - i, k] - v


def test_names_set_again_after_the_cut_are_not_carried(ptxas):
    a = np.random.default_rng(3).standard_normal((64, 4)).astype(np.float32)
    b = np.zeros_like(a)
    names_set_again_after_a_barrier(a, b)
    mirrored = a[::-1]
    np.testing.assert_allclose(b, mirrored - mirrored[:, :1], rtol=1e-6, atol=1e-6)
    ptxas(names_set_again_after_a_barrier.compile(a, b, target="cuda", arch="sm_90a").ptx,
          "sm_90a")


@pytest.mark.gpu
def test_names_set_again_after_the_cut_on_the_gpu():
    import torch
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros_like(a)
    names_set_again_after_a_barrier(a, b)
    torch.cuda.synchronize()
    want = np.zeros((64, 4), np.float32)
    names_set_again_after_a_barrier(a.cpu().numpy(), want)
    np.testing.assert_allclose(b.cpu().numpy(), want, rtol=1e-6, atol=1e-6)


@T.macro
def _mirror_stage(S, A, B, i, n):
    w = A[i] * 3.0
    S[i] = w
    T.sync_threads()
    B[i] = S[n - 1 - i] + w


@tilejit.kernel
def macro_value_across_a_barrier(A, B):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((64,), T.float32)
        for i in T.Parallel(64):
            _mirror_stage(S, A, B, i, 64)


def test_a_macros_name_across_a_barrier_is_named_as_written():
    a = np.zeros(64, np.float32)
    with pytest.raises(CompileError, match="^`w` is set in this T.Parallel loop"):
        macro_value_across_a_barrier(a, a.copy())


@tilejit.kernel
def local_across_a_barrier(A, B):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((64,), T.float32)
        t = T.alloc_local((1,), T.float32)
        for i in T.Parallel(64):
            t[0] = A[i] + 1.0
            S[i] = A[i]
            T.sync_threads()
            B[i] = S[63 - i] + t[0]


@tilejit.kernel
def set_on_both_paths_after_a_barrier(A, B):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((64,), T.float32)
        for i in T.Parallel(64):
            t = A[i] * 2.0
            S[i] = t
            T.sync_threads()
            if i % 2 == 0:
                t = S[63 - i]
            else:
                t = -S[63 - i]
            B[i] = t


def test_a_local_tile_across_the_cut_is_an_error_and_a_name_set_on_both_paths_is_not():
    a = np.arange(64, dtype=np.float32)
    with pytest.raises(CompileError, match="^`t` is set in this T.Parallel loop"):
        local_across_a_barrier(a, a.copy())
    b = np.zeros_like(a)
    set_on_both_paths_after_a_barrier(a, b)
    want = 2 * a[::-1] * np.where(np.arange(64) % 2 == 0, 1, -1)
    np.testing.assert_array_equal(b, want)

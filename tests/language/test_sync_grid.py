"""``T.sync_grid()``: a barrier of the whole grid, as TileLang's (CUDA's
``this_grid().sync()``). In the simulator the blocks run concurrently, in turns between
barriers (a block that skips one is a ``DeadlockError``); in PTX thread 0 of each block
arrives with ``atom.add.release.gpu`` and waits with ``ld.acquire.gpu`` between two block
barriers (assembled for sm_80 and sm_90a); on the GPU the launch is cooperative, and a
grid larger than the device holds at once is refused before anything runs. Misplaced
barriers are compile errors naming the line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.roles import DeadlockError

N = 1024
STEPS = 6


@tilejit.kernel
def reverse_add(A, n: T.constexpr = N):
    """TileLang's cooperative test, its barriers outside the T.Parallel loops: every
    block writes its indices, then reads the mirrored ones another block wrote."""
    with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
        A_local = T.alloc_fragment((64,), T.float32)
        base = bx * 64
        for i in T.Parallel(64):
            A[base + i] = base + i
        T.sync_grid()
        for i in T.Parallel(64):
            A_local[i] = A[n - base - i - 1]
        T.sync_grid()
        for i in T.Parallel(64):
            A[base + i] = A[base + i] + A_local[i]


@tilejit.kernel
def reverse_add_barriers_in_loops(A, n: T.constexpr = N):
    """TileLang's cooperative test as it is written: the second barrier among the
    T.Parallel body's statements, the loop cut in two there
    (``frontend/parallel_barriers.py``)."""
    with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
        A_local = T.alloc_fragment((64,), T.float32)
        base = bx * 64
        for i in T.Parallel(64):
            A[base + i] = base + i
        T.sync_grid()
        for i in T.Parallel(64):
            A_local[i] = A[n - base - i - 1]
            T.sync_grid()
            A[base + i] = A[base + i] + A_local[i]


@tilejit.kernel
def smooth(X, Y, S, steps: T.constexpr = STEPS, n: T.constexpr = N):
    """``steps`` rounds of X[i] = (X[i-1] + 2 X[i] + X[i+1]) / 4 (ends fixed) through Y,
    a grid barrier after each half step; then every block sums X and writes the total
    to S[bx] (each block reads what all the others wrote)."""
    with T.Kernel(n // 128, threads=128) as bx:
        total = T.alloc_fragment((1,), T.float32)
        part = T.alloc_fragment((128,), T.float32)
        for _step in T.serial(steps):
            for i in T.Parallel(128):
                g = bx * 128 + i
                if g > 0 and g < n - 1:
                    Y[g] = (X[g - 1] + 2 * X[g] + X[g + 1]) * 0.25
                else:
                    Y[g] = X[g]
            T.sync_grid()
            for i in T.Parallel(128):
                X[bx * 128 + i] = Y[bx * 128 + i]
            T.sync_grid()
        T.clear(total)
        for j in T.serial(n // 128):
            for i in T.Parallel(128):
                part[i] = X[j * 128 + i]
            T.reduce_sum(part, total, dim=0, clear=False)
        S[bx] = total[0]


def _smooth_reference(x, steps=STEPS):
    x = x.astype(np.float64)
    for _ in range(steps):
        y = x.copy()
        y[1:-1] = (x[:-2] + 2 * x[1:-1] + x[2:]) * 0.25
        x = y
    return x


def test_blocks_see_each_others_writes_across_the_barrier_in_the_simulator():
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    tilejit.kernel(reverse_add.func, target="sim")(a)
    np.testing.assert_array_equal(a, np.full(N, N - 1, np.float32))


def test_a_barrier_in_a_parallel_body_cuts_the_loop_in_the_simulator():
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    tilejit.kernel(reverse_add_barriers_in_loops.func, target="sim")(a)
    np.testing.assert_array_equal(a, np.full(N, N - 1, np.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_barrier_in_a_parallel_body_is_the_grids_in_ptx(ptxas, arch):
    ptx = reverse_add_barriers_in_loops.compile(np.zeros(N, np.float32), target="cuda",
                                                arch=arch).ptx
    assert ptx.count("atom.add.release.gpu.global.u32") == 2
    ptxas(ptx, arch)


def test_barriers_in_a_loop_in_the_simulator():
    x = np.random.default_rng(1).random(N, dtype=np.float32)
    expected = _smooth_reference(x)
    y, s = np.zeros_like(x), np.zeros(N // 128, np.float32)
    tilejit.kernel(smooth.func, target="sim")(x, y, s)
    np.testing.assert_allclose(x, expected, rtol=1e-5)
    np.testing.assert_allclose(s, np.full(N // 128, expected.sum()), rtol=1e-4)


@tilejit.kernel
def skipped_by_block_zero(A):
    with T.Kernel(4, threads=32) as bx:
        A[bx] = 1
        if bx > 0:
            T.sync_grid()
        A[bx] = 2


def test_a_block_that_skips_the_barrier_is_a_deadlock_in_the_simulator():
    a = np.zeros(4, np.float32)
    with pytest.raises(DeadlockError) as e:
        tilejit.kernel(skipped_by_block_zero.func, target="sim")(a)
    text = str(e.value)
    assert "block (0, 0, 0) finished after 0 grid barrier(s)" in text
    assert "waits at its grid barrier 1" in text and "T.sync_grid()" in text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_arrives_and_waits_at_gpu_scope(ptxas, arch):
    a = np.zeros(N, np.float32)
    ptx = reverse_add.compile(a, target="cuda", arch=arch).ptx
    assert ptx.count("atom.add.release.gpu.global.u32") == 2
    assert "ld.acquire.gpu.global.u32" in ptx and "nanosleep" in ptx
    assert ".global .align 4 .u32 __tj_grid_barrier" in ptx
    assert ptx.count("bar.sync") >= 4
    ptxas(ptx, arch)


def test_stores_before_a_barrier_are_not_moved_past_it():
    """The tensors of a kernel with a grid barrier are not ``noalias``: with it, LLVM
    took a step's stores of X and Y for this thread's alone and kept only the last
    step's (the GPU then read stale neighbours: found on the H200, 2026-12-04)."""
    x = np.zeros(N, np.float32)
    ptx = smooth.compile(x, x.copy(), np.zeros(8, np.float32), target="cuda",
                         arch="sm_90a").ptx
    body = ptx[ptx.index(".entry"):]
    first_barrier = body.index("atom.add.release.gpu")
    assert "st.global" in body[:first_barrier]
    assert body.count("st.global") >= 2 * STEPS


def test_the_compiled_kernel_is_marked_cooperative():
    x = np.zeros(N, np.float32)
    handle = smooth.compile(x, x.copy(), np.zeros(8, np.float32), target="cuda",
                            arch="sm_90a")
    assert handle.compiled.cooperative
    assert not without_barrier.compile(x, target="cuda", arch="sm_90a").compiled.cooperative


@tilejit.kernel
def without_barrier(A):
    with T.Kernel(4, threads=32) as bx:
        A[bx] = 1


@tilejit.kernel
def in_parallel(A):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(64):
            A[bx * 64 + i] = i
            if i < 32:
                T.sync_grid()


@tilejit.kernel
def under_thread_branch(A):
    with T.Kernel(2, threads=128) as bx:
        tx = T.get_thread_binding()
        if tx < 64:
            T.sync_grid()
        A[bx] = 1


@tilejit.kernel
def in_pipelined(A, B):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((64,), T.float32)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[k * 64:(k + 1) * 64], S)
            T.sync_grid()
            T.copy(S, B[k * 64:(k + 1) * 64])


@tilejit.kernel
def with_argument(A):
    with T.Kernel(2, threads=128) as bx:
        T.sync_grid(1)
        A[bx] = 1


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


@pytest.mark.parametrize("kernel, words, line", [
    (in_parallel, "inside a T.Parallel loop", "            if i < 32:"),
    (under_thread_branch, "depends on the thread index", "        if tx < 64:"),
    (in_pipelined, "inside a T.Pipelined loop", "            T.sync_grid()\n            T.copy(S"),
    (with_argument, "takes no arguments", "T.sync_grid(1)"),
])
def test_misplaced_barriers_are_compile_errors(kernel, words, line):
    a = np.zeros(256, np.float32)
    args = (a, a.copy()) if kernel is in_pipelined else (a,)
    with pytest.raises(CompileError) as e:
        kernel.compile(*args, target="cuda", arch="sm_90a")
    assert words in str(e.value)
    assert e.value.lineno is not None


def test_amdgpu_is_refused_by_name():
    a = np.zeros(N, np.float32)
    with pytest.raises(CompileError, match="CUDA only"):
        reverse_add.compile(a, target="amdgpu", arch="gfx942")


# -- on the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_blocks_see_each_others_writes():
    import torch
    a = torch.rand(N, device="cuda")
    reverse_add(a)
    torch.cuda.synchronize()
    assert torch.equal(a, torch.full_like(a, N - 1))


@pytest.mark.gpu
def test_gpu_a_barrier_in_a_parallel_body_cuts_the_loop():
    import torch
    a = torch.rand(N, device="cuda")
    reverse_add_barriers_in_loops(a)
    torch.cuda.synchronize()
    assert torch.equal(a, torch.full_like(a, N - 1))


@pytest.mark.gpu
def test_gpu_barriers_in_a_loop_match_the_reference_and_simulator():
    import torch
    x0 = np.random.default_rng(2).random(N, dtype=np.float32)
    x, y = torch.tensor(x0, device="cuda"), torch.zeros(N, device="cuda")
    s = torch.zeros(N // 128, device="cuda")
    for _ in range(3):          # the barrier word is reused across launches
        x.copy_(torch.tensor(x0))
        smooth(x, y, s)
    torch.cuda.synchronize()
    expected = _smooth_reference(x0)
    np.testing.assert_allclose(x.cpu().numpy(), expected, rtol=1e-5)
    xs, ys, ss = x0.copy(), np.zeros_like(x0), np.zeros(N // 128, np.float32)
    tilejit.kernel(smooth.func, target="sim")(xs, ys, ss)
    np.testing.assert_allclose(x.cpu().numpy(), xs, rtol=1e-6)
    np.testing.assert_allclose(s.cpu().numpy(), ss, rtol=1e-5)


@pytest.mark.gpu
def test_gpu_launches_on_two_streams_take_turns():
    import torch
    x0 = np.random.default_rng(3).random(N, dtype=np.float32)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = []
    for k in range(4):
        with torch.cuda.stream(streams[k % 2]):
            x, y = torch.tensor(x0, device="cuda"), torch.zeros(N, device="cuda")
            s = torch.zeros(N // 128, device="cuda")
            smooth(x, y, s)
            outs.append(x)
    torch.cuda.synchronize()
    expected = _smooth_reference(x0)
    for x in outs:
        np.testing.assert_allclose(x.cpu().numpy(), expected, rtol=1e-5)


@tilejit.kernel
def too_many_blocks(A, blocks: T.constexpr):
    with T.Kernel(blocks, threads=1024) as bx:
        A[bx] = 1
        T.sync_grid()
        A[bx] = 2


@pytest.mark.gpu
def test_gpu_a_grid_larger_than_the_device_holds_is_refused_before_it_runs():
    import torch
    blocks = 100_000
    a = torch.zeros(blocks, device="cuda")
    with pytest.raises(ValueError, match=r"holds at most \d+: \d+ block\(s\) of 1024 threads"):
        too_many_blocks(a, blocks)
    torch.cuda.synchronize()
    assert int(a.sum()) == 0            # nothing ran


@tilejit.kernel
def in_persistent(A, tiles: T.constexpr = 5):
    with T.Kernel(4, threads=128) as bx:
        for t in T.Persistent([tiles], 4, bx):
            A[t] = 1
            T.sync_grid()


def test_a_barrier_in_a_persistent_loop_is_a_compile_error():
    with pytest.raises(CompileError, match="inside a T.Persistent loop") as e:
        in_persistent.compile(np.zeros(8, np.float32), target="cuda", arch="sm_90a")
    assert e.value.lineno == _line("for t in T.Persistent([tiles], 4, bx):") + 2


@tilejit.kernel
def ws_roles(A):
    with T.Kernel(2, threads=256) as bx:
        with T.ws(0):
            A[bx] = 1
        T.sync_grid()


def test_a_barrier_in_a_kernel_with_ws_roles_is_refused_in_the_simulator_too():
    with pytest.raises(CompileError, match="T.ws warpgroup roles"):
        tilejit.kernel(ws_roles.func, target="sim")(np.zeros(2, np.float32))
    with pytest.raises(CompileError, match="T.ws warpgroup roles"):
        ws_roles.compile(np.zeros(2, np.float32), target="cuda", arch="sm_90a")


def test_a_large_grid_runs_in_seconds_in_the_simulator():
    import time
    a = np.zeros(2048 * 64, np.float32)
    start = time.perf_counter()
    tilejit.kernel(reverse_add.func, target="sim")(a, 2048 * 64)
    assert time.perf_counter() - start < 60
    np.testing.assert_array_equal(a, np.full(a.size, a.size - 1, np.float32))


@pytest.mark.gpu
def test_gpu_a_launch_from_a_fresh_thread_after_another_stream():
    """The launch orders itself after the last one on another stream: with no context
    current on a new host thread, that wait needs one made current first."""
    import threading

    import torch
    x0 = np.random.default_rng(4).random(N, dtype=np.float32)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x, y = torch.tensor(x0, device="cuda"), torch.zeros(N, device="cuda")
        s = torch.zeros(N // 128, device="cuda")
        smooth(x, y, s)
    side.synchronize()
    x2 = torch.tensor(x0, device="cuda")
    errors = []

    def other():
        try:
            smooth(x2, torch.zeros(N, device="cuda"), torch.zeros(N // 128, device="cuda"))
            torch.cuda.synchronize()
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(e)
    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert not errors, errors
    np.testing.assert_allclose(x2.cpu().numpy(), _smooth_reference(x0), rtol=1e-5)


@T.macro
def publish(A, bx):
    """A phase of work and the grid barrier, in a macro (inlined into the kernel)."""
    for i in T.Parallel(64):
        A[bx * 64 + i] = bx * 64 + i
    T.sync_grid()


@tilejit.kernel
def mirrored(A, B):
    with T.Kernel(4, threads=64) as bx:
        publish(A, bx)
        for i in T.Parallel(64):
            B[bx * 64 + i] = A[255 - bx * 64 - i]


def test_a_barrier_in_a_macro_is_the_kernels():
    a, b = np.zeros(256, np.float32), np.zeros(256, np.float32)
    tilejit.kernel(mirrored.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, np.arange(255, -1, -1, dtype=np.float32))
    ptx = mirrored.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert "atom.add.release.gpu.global.u32" in ptx


@pytest.mark.gpu
def test_gpu_a_barrier_in_a_macro():
    import torch
    a, b = torch.zeros(256, device="cuda"), torch.zeros(256, device="cuda")
    mirrored(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.arange(255, -1, -1, device="cuda", dtype=torch.float32))


@tilejit.kernel
def staged(A, B, C):
    """Block bx sums its 128 rows of A through a pipelined loop and writes them to B
    through a shared tile; after the grid barrier it reads another block's rows."""
    with T.Kernel(4, threads=128) as bx:
        S = T.alloc_shared((128, 64), T.float32)
        O = T.alloc_shared((128, 64), T.float32)
        acc = T.alloc_fragment((128, 64), T.float32)
        T.clear(acc)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[bx * 128:(bx + 1) * 128, k * 64:(k + 1) * 64], S)
            for i, j in T.Parallel(128, 64):
                acc[i, j] += S[i, j]
        T.copy(acc, O)
        T.copy(O, B[bx * 128:(bx + 1) * 128, :])
        T.sync_grid()
        T.copy(B[(3 - bx) * 128:(4 - bx) * 128, :], acc)
        T.copy(acc, C[bx * 128:(bx + 1) * 128, :])


def test_a_kernel_with_a_grid_barrier_keeps_its_copies_in_the_generic_proxy():
    a = np.random.default_rng(5).random((512, 256), dtype=np.float32)
    b, c = np.zeros((512, 64), np.float32), np.zeros((512, 64), np.float32)
    ptx = staged.compile(a, b, c, target="cuda", arch="sm_90a").ptx
    assert "cp.async.bulk" not in ptx and "cp.async" in ptx
    tilejit.kernel(staged.func, target="sim")(a, b, c)
    sums = a.reshape(512, 4, 64).sum(axis=1)
    np.testing.assert_allclose(b, sums, rtol=1e-5)
    np.testing.assert_allclose(c, np.concatenate([sums[384:], sums[256:384], sums[128:256],
                                                  sums[:128]]), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_pipelined_copies_around_a_grid_barrier():
    import torch
    a = torch.rand(512, 256, device="cuda")
    b, c = torch.zeros(512, 64, device="cuda"), torch.zeros(512, 64, device="cuda")
    staged(a, b, c)
    torch.cuda.synchronize()
    sums = a.reshape(512, 4, 64).sum(dim=1)
    torch.testing.assert_close(b, sums, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c, torch.cat([sums[384:], sums[256:384], sums[128:256],
                                             sums[:128]]), rtol=1e-5, atol=1e-5)

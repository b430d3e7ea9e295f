"""A kernel's own named barriers: ``T.sync_threads(barrier_id, arrive_count)`` reached by
some threads only (a scan inside ``if tx < 128``, as TileLang's top-k selector writes
one), and ``T.named_barrier_arrive`` handing a shared tile between ``T.ws`` roles.
On the GPU ``barrier.sync`` / ``barrier.arrive`` (assembled for sm_80 and sm_90a); in
the simulator the threads that reach each barrier are counted (a wrong count is a
``ThreadCodeError``, a handoff no role completes a ``DeadlockError``); bad ids and counts,
and ids tilejit uses itself, are compile errors naming the line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.roles import DeadlockError
from tilejit.sim.threads import ThreadCodeError


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


@tilejit.kernel
def range_scan(A, B, first: T.constexpr = 128, count: T.constexpr = 128):
    """Inclusive prefix sums of A[0:first] by its threads alone (Hillis-Steele, the
    exchange ordered by barrier 3 of those threads); the other threads double A."""
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), T.int32)
        v = T.alloc_var(T.int32)
        if tx < first:
            S[tx] = A[tx]
            for i in T.serial(7):
                T.sync_threads(3, count)            # the range's barrier
                if tx >= (1 << i):
                    v = S[tx] + S[tx - (1 << i)]
                T.sync_threads(3, count)
                if tx >= (1 << i):
                    S[tx] = v
            T.sync_threads(3, count)
            B[tx] = S[tx]
        else:
            B[tx] = A[tx] * 2


def _scan_expected(a):
    return np.concatenate([np.cumsum(a[:128]), a[128:] * 2]).astype(np.int32)


def test_a_range_of_threads_scans_on_its_own_barrier_in_the_simulator():
    a = np.arange(256, dtype=np.int32) % 7 - 3
    b = np.zeros(256, np.int32)
    tilejit.kernel(range_scan.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, _scan_expected(a))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_it_is_barrier_sync_of_the_ranges_threads(ptxas, arch):
    a = np.zeros(256, np.int32)
    ptx = range_scan.compile(a, a.copy(), target="cuda", arch=arch).ptx
    assert "barrier.sync" in ptx and "bar.sync \t0" not in ptx.replace("bar.sync 0", "")
    ptxas(ptx, arch)


def test_a_count_that_is_not_the_threads_reaching_it_is_reported_by_the_simulator():
    a = np.zeros(256, np.int32)
    with pytest.raises(ThreadCodeError, match=r"T.sync_threads\(3, 256\): 128 threads \(from "
                                              r"thread 0\) reach named barrier 3, which waits "
                                              r"for 256: on the GPU they wait forever") as info:
        tilejit.kernel(range_scan.func, target="sim")(a, a.copy(), count=256)
    assert f"line {_line('# the range')}" in str(info.value)
    with pytest.raises(ThreadCodeError, match="warp 1 reaches named barrier 3 with only some "
                                              "of its threads"):
        tilejit.kernel(range_scan.func, target="sim")(a, a.copy(), first=48)


@tilejit.kernel
def handoff(A, B, full: T.constexpr = 4, empty: T.constexpr = 5, count: T.constexpr = 256,
            arrive_at: T.constexpr = 0):
    """Role 1 copies each row of A into a shared tile and arrives at ``full``; role 0
    waits there, doubles the row into B and arrives at ``empty``, which role 1 waits on
    before it overwrites the tile. ``arrive_at``: the producer arrives at that barrier
    instead of ``full`` (a mistake)."""
    N, D = A.shape
    with T.Kernel(1, threads=256):
        buf = T.alloc_shared((1, D), A.dtype)
        out = T.alloc_fragment((1, D), A.dtype)
        for k in T.serial(N):
            with T.ws(1):
                if k > 0:
                    T.sync_threads(empty, count)        # producer waits
                T.copy(A[k:k + 1, 0:D], buf)
                T.named_barrier_arrive(arrive_at or full, count)     # producer arrives
            with T.ws(0):
                T.sync_threads(full, count)             # consumer waits
                T.copy(buf, out)
                for i, j in T.Parallel(1, D):
                    out[i, j] = out[i, j] * 2
                T.copy(out, B[k:k + 1, 0:D])
                if k < N - 1:
                    T.named_barrier_arrive(empty, count)


def test_roles_hand_a_tile_over_on_named_barriers_in_the_simulator():
    a = np.arange(5 * 128, dtype=np.float32).reshape(5, 128)
    b = np.zeros_like(a)
    tilejit.kernel(handoff.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, 2 * a)


def test_a_handoff_no_role_completes_is_a_deadlock():
    a = np.ones((3, 128), np.float32)
    with pytest.raises(DeadlockError) as info:
        tilejit.kernel(handoff.func, target="sim")(a, a.copy(), arrive_at=6)
    message = str(info.value)
    assert ("role 0 (threads 0-127) waits for the phase of parity 0 of named barrier 4 "
            f"(phase 0: 128 of 256 arrivals)\n  File \"{__file__}\", line "
            f"{_line('# consumer waits')}") in message
    assert ("role 1 (threads 128-255) waits for the phase of parity 0 of named barrier 5 "
            f"(phase 0: 128 of 256 arrivals)\n  File \"{__file__}\", line "
            f"{_line('# producer waits')}") in message


def test_the_handoff_is_barrier_arrive_and_sync_on_sm_90a(ptxas):
    a = np.zeros((5, 128), np.float32)
    ptx = handoff.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert "barrier.arrive" in ptx and "barrier.sync" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("full, count, message, where", [
    (16, 256, r"barrier_id must be an int in \[1, 15\] \(named barriers; 0 is the block's\), "
              r"got 16", "# producer arrives"),
    (4, 96 + 1, r"arrive_count must be a multiple of 32 \(a named barrier counts whole "
                r"warps\) in \[32, 256\] \(the block's threads\), got 97", "# producer waits"),
    (0, 256, r"barrier 0 is the block's own", "# producer arrives")])
def test_bad_ids_and_counts_are_compile_errors_at_the_line(full, count, message, where):
    a = np.zeros((2, 128), np.float32)
    with pytest.raises(CompileError, match=message) as info:
        handoff.compile(a, a.copy(), full=full, count=count, target="cuda", arch="sm_90a")
    assert f"line {_line(where)}" in str(info.value)


def test_an_id_no_role_synchronizes_on_is_the_kernels(ptxas):
    """Role k's own barrier is 1 + k where the role synchronizes (its tile operations'
    barriers, a reduction's exchange); neither role of the handoff does, so 2 is free
    (tests/tilelang/test_thread_storage_sync.py has the refusal)."""
    a = np.arange(3 * 128, dtype=np.float32).reshape(3, 128)
    ptx = handoff.compile(a, a.copy(), full=2, empty=1, target="cuda", arch="sm_90a").ptx
    ptxas(ptx, "sm_90a")
    b = np.zeros_like(a)
    tilejit.kernel(handoff.func, target="sim")(a, b, full=2, empty=1)
    np.testing.assert_array_equal(b, 2 * a)


def test_an_id_held_in_a_numpy_integer_is_that_int(ptxas):
    """``T.int32(1)`` (a numpy integer) names barrier 1, in the simulator and on the
    GPU, as TileLang's ``barrier_id = T.int32(1); T.sync_threads(barrier_id)`` does."""
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            barrier_id = T.int32(1)
            T.sync_threads(barrier_id)
            if tx < 128:
                T.sync_threads(barrier_id + 1, T.int32(128))
            A[tx] = 1.0
    a = np.zeros(256, np.float32)
    tilejit.compile(main, target="sim")(a)
    assert (a == 1).all()
    ptx = tilejit.compile(main, target="cuda -arch=sm_80").get_kernel_source()
    assert ptx.count("barrier.sync") == 2
    ptxas(ptx, "sm_80")


def test_in_a_t_parallel_loop_it_is_refused():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                T.named_barrier_arrive(1, 128)
                A[i] = 1.0
    with pytest.raises(CompileError, match="T.named_barrier_arrive.. inside a T.Parallel"):
        tilejit.compile(main, target="cuda -arch=sm_90a")


def test_an_arrival_in_per_thread_code_is_not_modelled_by_the_simulator():
    @tilejit.kernel
    def arrive_in_a_branch(A):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 32:
                T.named_barrier_arrive(1, 64)
            else:
                T.sync_threads(1, 64)
            A[tx] = 1.0
    a = np.zeros(64, np.float32)
    with pytest.raises(ThreadCodeError, match="modelled between a kernel's T.ws warpgroup "
                                              "roles only"):
        tilejit.kernel(arrive_in_a_branch.func, target="sim")(a)
    ptx = arrive_in_a_branch.compile(a, target="cuda", arch="sm_80").ptx
    assert "barrier.arrive" in ptx


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    a = (torch.arange(256, dtype=torch.int32, device="cuda") % 7) - 3
    b = torch.zeros(256, dtype=torch.int32, device="cuda")
    range_scan(a, b)
    np.testing.assert_array_equal(b.cpu().numpy(), _scan_expected(a.cpu().numpy()))
    x = torch.randn(64, 128, device="cuda")
    y = torch.zeros_like(x)
    handoff(x, y)
    torch.testing.assert_close(y, 2 * x, rtol=0, atol=0)
    sim = np.zeros((64, 128), np.float32)
    tilejit.kernel(handoff.func, target="sim")(x.cpu().numpy(), sim)
    np.testing.assert_array_equal(y.cpu().numpy(), sim)


@tilejit.kernel
def two_groups_one_id(A, B, same_id: T.constexpr = 1):
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        S = T.alloc_shared((256,), T.float32)
        if tx < 128:
            S[tx] = A[tx]
            T.sync_threads(1, 128)
            B[tx] = S[127 - tx]
        else:
            S[tx] = A[tx] * 2
            T.sync_threads(1 if same_id else 2, 128)       # the second group
            B[tx] = S[383 - tx]


def test_two_groups_on_one_id_are_reported_by_the_simulator():
    """On the GPU both groups arrive at barrier 1 at once and complete each other's
    phase; each group needs its own id (or a barrier of the block between them)."""
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    with pytest.raises(ThreadCodeError, match=r"threads from 128 sync on named barrier 1, "
                                              r"which other threads \(from 0\) used") as info:
        tilejit.kernel(two_groups_one_id.func, target="sim")(a, b)
    assert f"line {_line('# the second group')}" in str(info.value)
    tilejit.kernel(two_groups_one_id.func, target="sim")(a, b, same_id=0)
    np.testing.assert_array_equal(b, np.concatenate([a[127::-1], 2 * a[:127:-1]]))


@tilejit.kernel
def phases_run_ahead(B):
    with T.Kernel(1, threads=384):
        with T.ws(0):
            T.sync_threads(4, 256)          # released by phase 0
            B[0] = 1.0
        with T.ws(1):
            T.named_barrier_arrive(4, 256)  # phase 0, with role 0
            T.named_barrier_arrive(4, 256)  # phase 1, with role 2
        with T.ws(2):
            T.named_barrier_arrive(4, 256)


def test_a_waiter_is_released_even_when_later_phases_complete_first():
    b = np.zeros(384, np.float32)
    tilejit.kernel(phases_run_ahead.func, target="sim")(b)
    assert b[0] == 1.0


@tilejit.kernel
def branch_on_memory(A, B, read_global: T.constexpr = 0):
    """A value read back from shared memory at a uniform index is the same in every
    thread (a barrier orders the store first), so a branch on it may hold a barrier; one
    read from a global tensor another thread just wrote is not ordered by any barrier."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), T.int32)
        S[tx] = tx
        if read_global:
            B[tx] = tx
        v = B[0] if read_global else S[127]
        if v > 64:
            T.sync_threads()
        A[tx] = S[(tx + 1) % 128]


def test_a_branch_on_a_shared_value_is_uniform_and_on_a_global_one_is_not():
    a = np.zeros(128, np.int32)
    b = np.zeros(128, np.int32)
    tilejit.kernel(branch_on_memory.func, target="sim")(a, b)
    np.testing.assert_array_equal(a, (np.arange(128) + 1) % 128)
    branch_on_memory.compile(a, b, target="cuda", arch="sm_80")
    with pytest.raises(CompileError, match=r"T.sync_threads\(\) inside a branch or loop "
                                           r"that depends on the thread index"):
        branch_on_memory.compile(a, b, read_global=1, target="cuda", arch="sm_80")

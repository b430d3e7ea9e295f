"""Races between warpgroup roles on shared tiles, found by the simulator (sim/races.py):
an access no mbarrier arrival and wait orders after another role's conflicting access
is a RaceError naming the tile, both roles and both lines, whatever order the
simulator's turns happened to run them in; a correctly synchronized ring of stages,
and the seed's T.ws GEMM listing, are not reported."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.races import RaceError
import test_warp_roles                  # its producer/consumer ring, ws_copy

ws_copy = test_warp_roles.ws_copy
ROLES = test_warp_roles.__file__


def _line(text, path=__file__):
    return next(n for n, src in enumerate(open(path), 1) if text in src)


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_synchronized_ring_has_no_race(stages):
    a = np.arange(7 * 16, dtype=np.float32).reshape(7, 16)
    b = np.zeros_like(a)
    ws_copy(a, b, stages, 0)
    np.testing.assert_array_equal(b, 2 * a)


@pytest.mark.parametrize("stages", [1, 2])
def test_a_stage_released_before_it_is_read_races_with_its_refill(stages):
    """The consumer arrives on the stage's empty barrier before reading it: the
    producer's next load into that stage is ordered after the arrival only, not after
    the read (the simulator's turns ran the read first: the data came out right)."""
    a = np.arange(6 * 16, dtype=np.float32).reshape(6, 16)
    b = np.zeros_like(a)
    with pytest.raises(RaceError) as info:
        ws_copy(a, b, stages, 0, 1)
    message = str(info.value)
    assert message.startswith("race on shared tile buf[0, 0, 0]: warpgroup role 1 writes it "
                              f'here\n  File "{ROLES}", line {_line("T.tma_copy(A[k:", ROLES)}')
    assert (f'while role 0 read it here\n  File "{ROLES}", '
            f'line {_line("T.copy(buf[k % stages", ROLES)}') in message
    assert "no mbarrier arrival and wait orders the two" in message


@tilejit.kernel
def handoff(A, B, wait: T.constexpr):
    """Role 0 writes a shared tile with threads' stores, role 1 reads it: ordered only
    by role 0's arrival and role 1's wait."""
    N = A.shape[0]
    with T.Kernel(1, threads=256) as bx:
        s = T.alloc_shared((N,), A.dtype)
        bar = T.alloc_barrier(128)
        with T.ws(0):
            for i in T.Parallel(N):
                s[i] = A[i] + 1                         # role 0 writes
            T.mbarrier_arrive(bar)
        with T.ws(1):
            if wait:
                T.mbarrier_wait_parity(bar, 0)
            for i in T.Parallel(N):
                B[i] = s[i]                             # role 1 reads


def test_a_handoff_through_shared_memory_needs_the_wait():
    a = np.arange(64, dtype=np.float32)
    b = np.zeros_like(a)
    handoff(a, b, 1)
    np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(RaceError) as info:
        handoff(a, np.zeros_like(a), 0)
    message = str(info.value)
    assert "race on shared tile s[0]: warpgroup role 1 reads it here" in message
    assert f'line {_line("# role 1 reads")}' in message
    assert f'while role 0 wrote it here\n  File "{__file__}", line {_line("# role 0 writes")}' \
        in message or f'line {_line("# role 0 writes")}' in message


@tilejit.kernel
def block_then_role(A, B):
    with T.Kernel(1, threads=256) as bx:
        s = T.alloc_shared((128,), A.dtype)
        f = T.alloc_fragment((128,), A.dtype)
        bar = T.alloc_barrier(128)
        T.copy(A[0:128], s)             # the block's statement: every role runs it
        with T.ws(0):
            T.copy(s, f)
            T.copy(f, B[0:128])
        with T.ws(1):
            T.mbarrier_arrive(bar)


def test_the_blocks_own_statements_are_ordered_by_the_compilers_barrier():
    """A shared tile written by the block's statements (outside the roles) and read in a
    role: no race in the simulator, and on the GPU a block barrier between the two (the
    copy is every role's; the role reads what other threads wrote)."""
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    block_then_role(a, b)
    np.testing.assert_array_equal(b, a)
    ptx = block_then_role.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert ptx.count("bar.sync \t0;") == 2       # after the mbarrier init, after the copy


@pytest.mark.gpu
def test_the_blocks_statement_and_a_role_on_the_gpu():
    """block_then_role on sm_90a: the role reads what the block's copy wrote (with the
    block barrier the barrier pass now places between them), against the simulator."""
    import torch
    a = torch.arange(128, dtype=torch.float32)
    b = torch.zeros_like(a).cuda()
    block_then_role(a.cuda(), b)
    torch.cuda.synchronize()
    sim = torch.zeros_like(a)
    block_then_role(a, sim)
    assert torch.equal(b.cpu(), a) and torch.equal(sim, a)


@tilejit.kernel
def shifted(A, B, form: T.constexpr):
    N = A.shape[0]
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((N + 1,), A.dtype)
        for i in T.Parallel(N + 1):
            s[i] = A[i % N]
        for i in T.Parallel(N):
            if form == 0:
                s[i] = s[i] * 2                 # each iteration its own element
            elif form == 1:
                s[i] = s[i + 1] * 2             # reads its neighbour's element
            else:
                s[0] = A[i]                     # every iteration writes element 0
        for i in T.Parallel(N):
            B[i] = s[i + 1] + s[i]              # a later loop: ordered by a barrier


def test_iterations_of_a_parallel_loop_that_share_a_shared_element_race():
    """A T.Parallel loop's iterations run on different threads with no barrier between
    them: an element one iteration writes and another reads or writes is a race (the
    simulator's vectorized run would give the old values, the GPU either). Each
    iteration on its own element, or the accesses in separate loops, is not."""
    a = np.arange(64, dtype=np.float32)
    b = np.zeros_like(a)
    shifted(a, b, 0)
    s = np.append(a, a[0]) * np.append(np.full(64, 2, np.float32), 1)
    np.testing.assert_array_equal(b, s[1:] + s[:-1])
    with pytest.raises(RaceError, match=r"race on shared tile s\[\d+\]: an iteration of a "
                                        r"T.Parallel loop (reads|writes) it and it is "
                                        r"(written|read) by another iteration") as info:
        shifted(a, np.zeros_like(a), 1)
    assert f'line {_line("reads its neighbour")}' in str(info.value)
    with pytest.raises(RaceError, match=r"s\[0\].*written by another iteration") as info:
        shifted(a, np.zeros_like(a), 2)
    assert f'line {_line("every iteration writes")}' in str(info.value)


@tilejit.kernel
def read_then_write(A, B, form: T.constexpr):
    N = A.shape[0]
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((N,), A.dtype)
        for i in T.Parallel(N):
            s[i] = A[i]
        for i in T.Parallel(N):
            if form == 0:
                B[i] = s[i] + 1                 # its own element
            else:
                B[i] = s[(i + 1) % N] + 1       # its neighbour's
            s[i] = B[i] * 2                     # a later statement writes its own
        for i in T.Parallel(N):
            B[i] = s[i]


def test_a_read_is_checked_against_a_later_statements_write_in_the_loop():
    """A loop's reads of a tile it has not written yet are recorded only when its first
    write to the tile comes (sim/races.IterationRaces: most loops only read), so an
    element one iteration reads and another writes in a later statement of the same
    loop is still a race, reported at the write."""
    a = np.arange(64, dtype=np.float32)
    b = np.zeros_like(a)
    read_then_write(a, b, 0)
    np.testing.assert_array_equal(b, (a + 1) * 2)
    with pytest.raises(RaceError, match=r"race on shared tile s\[\d+\]: an iteration of a "
                                        r"T.Parallel loop writes it and it is read by "
                                        r"another iteration") as info:
        read_then_write(a, np.zeros_like(a), 1)
    assert f'line {_line("a later statement writes")}' in str(info.value)


@tilejit.kernel
def per_thread(A, B, form: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((129,), A.dtype)
        tx = T.get_thread_binding()
        s[tx] = A[tx]
        s[128] = 0                              # every thread stores one value: no race
        if form == 0:
            v = s[tx + 1]                       # read, then write in the next statement
            s[tx] = v
        elif form == 1:
            s[tx] = s[tx + 1]                   # read a neighbour's element and write
        elif form == 2:
            s[tx // 2] = A[tx]                  # two threads write each element
        else:
            if tx < 64:
                s[tx] = s[tx + 64]              # the elements read are not written
        B[tx] = s[tx]


def test_threads_that_share_a_shared_element_in_one_statement_race():
    """Per-thread code (T.get_thread_binding): the block's threads run each statement
    together, so an element one thread writes and another reads or writes in the same
    statement is a race: no barrier can come between a statement's read and its write,
    and the simulator's lanes (all reads, then all writes) would hide it. Across two
    statements the compiler's barrier orders them; an element every thread stores the
    same value to, or a branch whose threads touch disjoint elements, is not reported."""
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    per_thread(a, b, 0)
    np.testing.assert_array_equal(b, np.append(a[1:], 0))
    ptx = per_thread.compile(a, b, 0, target="cuda", arch="sm_90a").ptx
    after_read = ptx[ptx.index("ld.shared"):]
    assert "bar.sync" in after_read[:after_read.index("st.shared")]
    with pytest.raises(RaceError, match=r"race on shared tile s\[1\]: a thread writes it "
                                        r"and it is read by another thread in the same "
                                        r"statement") as info:
        per_thread(a, np.zeros_like(a), 1)
    assert f'line {_line("read a neighbour")}' in str(info.value)
    assert "no barrier can come between" in str(info.value)
    with pytest.raises(RaceError, match=r"s\[0\]: a thread writes it and it is written by "
                                        r"another thread") as info:
        per_thread(a, np.zeros_like(a), 2)
    assert f'line {_line("two threads write each")}' in str(info.value)
    b = np.zeros_like(a)
    per_thread(a, b, 3)
    np.testing.assert_array_equal(b, np.concatenate([a[64:], a[64:]]))


@pytest.mark.gpu
def test_per_thread_reads_then_writes_on_the_gpu():
    """per_thread's race-free forms on the GPU, against the simulator."""
    import torch
    a = torch.arange(128, dtype=torch.float32)
    for form in (0, 3):
        b = torch.zeros_like(a).cuda()
        per_thread(a.cuda(), b, form)
        torch.cuda.synchronize()
        sim = torch.zeros_like(a)
        per_thread(a, sim, form)
        assert torch.equal(b.cpu(), sim)


@tilejit.kernel
def shifted_in_place(X, B, form: T.constexpr):
    N = B.shape[0]
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(N):
            if form == 0:
                X[i] = X[i] * 2                 # each iteration its own element
            elif form == 1:
                X[i] = X[i + 1] * 2             # reads the next element
            elif form == 2:
                X[0] = X[i + 1]                 # all iterations write X[0]
            else:
                X[N] = 7                        # one value from every iteration: no race
        for i in T.Parallel(N):
            B[i] = X[i + 1] - X[i]              # a later loop: ordered by a barrier


@tilejit.kernel
def per_thread_global(X, B, form: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        if form == 0:
            v = X[tx + 1]                       # read, then write in the next statement
            X[tx] = v
        else:
            X[tx] = X[tx + 1]                   # read a neighbour's element and write
        B[tx] = X[tx]


def test_iterations_that_share_an_element_of_a_global_tensor_race():
    """The iterations of one T.Parallel loop (and the threads of one per-thread
    statement) race on a global tensor's element as on a shared tile's: the simulator
    reports it where the GPU gives either value. Large tensors are tracked by the
    elements one loop touches, so a loop over a small part of a large tensor stays
    cheap."""
    x = np.arange(65, dtype=np.float32)
    b = np.zeros(64, np.float32)
    shifted_in_place(x.copy(), b, 0)
    np.testing.assert_array_equal(b, np.append(x[1:64] * 2, 64) - x[:64] * 2)
    with pytest.raises(RaceError, match=r"race on tensor X\[\d+\]: an iteration of a "
                                        r"T.Parallel loop (reads|writes) it and it is "
                                        r"(written|read) by another iteration") as info:
        shifted_in_place(x.copy(), b, 1)
    assert f'line {_line("reads the next element")}' in str(info.value)
    with pytest.raises(RaceError, match=r"X\[0\].*written by another iteration") as info:
        shifted_in_place(x.copy(), b, 2)
    assert f'line {_line("all iterations write X[0]")}' in str(info.value)
    shifted_in_place(x.copy(), b, 3)
    x = np.arange(129, dtype=np.float32)
    b = np.zeros(128, np.float32)
    per_thread_global(x.copy(), b, 0)
    np.testing.assert_array_equal(b, x[1:])
    with pytest.raises(RaceError, match=r"race on tensor X\[1\]: a thread writes it and it "
                                        r"is read by another thread in the same statement"):
        per_thread_global(x.copy(), b, 1)


@pytest.mark.gpu
def test_iterations_on_their_own_global_elements_on_the_gpu():
    """The race-free forms on the GPU, against the simulator."""
    import torch
    for kernel, n, forms in ((shifted_in_place, 64, (0, 3)), (per_thread_global, 128, (0,))):
        for form in forms:
            x = torch.arange(n + 1, dtype=torch.float32)
            b, sim = torch.zeros(n).cuda(), torch.zeros(n)
            xs = x.clone()
            kernel(x.cuda(), b, form)
            torch.cuda.synchronize()
            kernel(xs, sim, form)
            assert torch.equal(b.cpu(), sim)


@tilejit.kernel
def flags(A, F, scalar_form: T.constexpr = False):
    """A flag set to one value from two statements (any iteration that finds a large
    element), and in the scalar form (a `while` in the body): every store writes the
    bytes already there, so no order matters; a NaN stored from every iteration too
    (found by a review: both were reported as races)."""
    N = A.shape[0]
    with T.Kernel(1, threads=128):
        for i in T.Parallel(N):
            if scalar_form:
                k = 0
                while k < 1:
                    k += 1
            if A[i] > 100.0:
                F[0] = 1.0
            if A[i] < -100.0:
                F[0] = 1.0
            F[1] = A[0]


@pytest.mark.parametrize("scalar_form", [False, True])
@pytest.mark.parametrize("first", [2.0, np.nan])
def test_stores_of_the_bytes_already_there_are_no_race(scalar_form, first):
    a = np.zeros(64, np.float32)
    a[0], a[3], a[7] = first, 500, -500
    f = np.zeros(2, np.float32)
    flags(a, f, scalar_form)
    np.testing.assert_array_equal(f, [1.0, first])


@tilejit.kernel
def scalar_copy(A, B):
    """A scalar-form loop (a `while` in the body): one access of one element per
    iteration."""
    N = A.shape[0]
    with T.Kernel(1, threads=128):
        for i in T.Parallel(N):
            k = 0
            while k < 1:
                k += 1
            B[i] = A[i] + k


def test_the_record_costs_each_access_its_own_size():
    """A review measured the first record (sorted and merged at every access) at 25 s
    for this loop of 16384 iterations (0.3 s before any record); each access now costs
    its own size (about 1 s here)."""
    import time
    a = np.random.default_rng(0).random(16384, dtype=np.float32)
    b = np.zeros_like(a)
    start = time.perf_counter()
    scalar_copy(a, b)
    assert time.perf_counter() - start < 8
    np.testing.assert_array_equal(b, a + 1)

"""`and` / `or` in the simulator's lane-wise code read their right side only on the lanes
the left side leaves open, as the GPU's `&&` / `||` do."""
import numpy as np

import tilejit
import tilejit.language as T


@tilejit.kernel
def guarded_reads(X, Y, Z):
    """`p > 0 and loc[p - 1] >= 0` (TileLang's top-k insertion loop): the right side is
    read only where the left holds, as the GPU's `&&` reads it; the simulator evaluated
    both sides on every lane and raised for `loc[-1]` (found by a user-style fuzz). In a
    T.Parallel too: `i < n and X[i] > 0` never reads X past n."""
    n = X.shape[0]
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        loc = T.alloc_local((4,), "float32")
        for t in T.serial(4):
            loc[t] = X[t]
        p = tx % 3
        Y[tx] = 0.0
        if p > 0 and loc[p - 1] >= 0 or p == 0 and loc[0] < -100:
            Y[tx] = 1.0
        for i in T.Parallel(32):
            if i < n and X[i] > 0:
                Z[i] = 1.0
            elif i >= n or X[i] < -1:
                Z[i] = 2.0


def test_and_or_read_their_right_side_where_the_left_asks():
    x = np.array([1.0, -2.0, 3.0, 4.0, -5.0], np.float32)
    y = np.zeros(32, np.float32)
    z = np.zeros(32, np.float32)
    guarded_reads(x, y, z)
    p = np.arange(32) % 3
    want_y = np.where(p == 1, 1.0, np.where(p == 2, 0.0, 0.0))
    np.testing.assert_array_equal(y, want_y)
    want_z = np.full(32, 2.0, np.float32)
    want_z[:5] = np.where(x > 0, 1.0, np.where(x < -1, 2.0, 0.0))
    np.testing.assert_array_equal(z, want_z)
    guarded_reads.compile(x, y, z, target="cuda", arch="sm_90a")


@tilejit.kernel
def swaps_under_a_branch(X, Y):
    """A tuple assignment with subscripts under a per-thread `if` (TileLang's sparse
    compress: `nz_idx[0], nz_idx[1] = nz_idx[1], nz_idx[0]`): several statements in the
    simulator's masked body (it had nested a list there: a TypeError at compile)."""
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        pair = T.alloc_local((2,), "float32")
        pair[0] = X[tx]
        pair[1] = X[tx] * 10
        if tx % 2 == 1:
            pair[0], pair[1] = pair[1], pair[0]
        Y[tx] = pair[0] - pair[1]


def test_a_swap_under_a_per_thread_branch(ptxas):
    x = np.arange(1, 33, dtype=np.float32)
    y = np.zeros(32, np.float32)
    swaps_under_a_branch(x, y)
    np.testing.assert_array_equal(y, np.where(np.arange(32) % 2 == 1, 9 * x, -9 * x))
    ptxas(swaps_under_a_branch.compile(x, y, target="cuda", arch="sm_90a").ptx, "sm_90a")


@tilejit.kernel
def counts_past_its_local_array(X, Y):
    """TileLang's 2:4 compressor's pattern: ``nz[count] = ...`` with ``count`` reaching the
    length of ``nz`` on the threads whose group has every value nonzero."""
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        nz = T.alloc_local((2,), "int32")
        nz[0] = 0
        nz[1] = 0
        count = T.alloc_var("int32")
        count = 0
        for i in T.unroll(3):
            nz[count] = T.if_then_else(X[tx * 3 + i] != 0, i, nz[count])
            count = T.if_then_else(X[tx * 3 + i] != 0, count + 1, count)
        Y[tx] = count


def test_a_threads_local_array_read_past_its_end_names_the_tile_and_thread():
    """The message shows the tile's own shape and index and the thread (the simulator
    holds every thread's copy in one array, the thread first)."""
    import pytest
    x = np.ones(96, np.float32)
    x[:6] = 0               # threads 0 and 1 count nothing; thread 2 reaches nz[2]
    y = np.zeros(32, np.int32)
    with pytest.raises(IndexError, match=r"nz\[2\] is out of bounds for shape \(2,\) "
                                         r"\(thread 2's T.alloc_local tile"):
        counts_past_its_local_array(x, y)


@tilejit.kernel
def reads_its_local_array_first(X, Y):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        v = T.alloc_local((4,), "float32")
        if tx > 5:
            v[1] = X[tx]
        Y[tx] = v[1]


def test_a_threads_unwritten_local_element_names_the_tile_and_thread():
    import pytest
    from tilejit.sim.runtime import UninitializedReadError
    x = np.ones(32, np.float32)
    with pytest.raises(UninitializedReadError, match=r"v\[1\] is read before it is written "
                                                     r"\(thread 0's local tile v, shape \(4,\)"):
        reads_its_local_array_first(x, np.zeros(32, np.float32))

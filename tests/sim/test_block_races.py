"""Races between the blocks of one launch on a global tensor (``sim/block_races.py``): the
simulator runs the blocks one after another, the GPU in any order, so a kernel whose
result depends on the order is reported here rather than given one of its answers."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.sim.block_races import BlockRaceError


@T.prim_func
def every_block_writes_the_row(A: T.Tensor((256,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            B[i] = A[bx * 64 + i]


@T.prim_func
def every_block_writes_the_same(A: T.Tensor((256,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            B[i] = A[i] * 2


@T.prim_func
def reads_the_next_blocks(A: T.Tensor((256,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            A[bx * 64 + i] = A[(bx * 64 + i + 64) % 256] + 1.0


@T.prim_func
def clamps_then_reads_the_next_blocks(A: T.Tensor((256,), "float32"),
                                      B: T.Tensor((256,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            A[bx * 64 + i] = T.max(A[bx * 64 + i], 0.0)
        for i in T.Parallel(64):
            B[bx * 64 + i] = A[(bx * 64 + i + 64) % 256]


@T.prim_func
def copies_through_shared(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        S = T.alloc_shared((64,), "float32")
        T.copy(A[bx * 64:(bx + 1) * 64], S)
        T.copy(S, B[bx * 64:(bx + 1) * 64])
        T.copy(B[bx * 64:(bx + 1) * 64], S)        # its own block's elements: in order
        T.copy(S, A[bx * 64:(bx + 1) * 64])


@T.prim_func
def tiles_overlap(A: T.Tensor((320,), "float32"), B: T.Tensor((320,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        S = T.alloc_shared((128,), "float32")
        T.copy(A[bx * 64:bx * 64 + 128], S)
        for i in T.Parallel(128):
            S[i] = S[i] + bx
        T.copy(S, B[bx * 64:bx * 64 + 128])     # each block's tile overlaps the next's


@T.prim_func
def sums_atomically(A: T.Tensor((256,), "float32"), B: T.Tensor((1,), "float32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            T.atomic_add(B[0], A[bx * 64 + i])


@T.prim_func
def last_block_reduces(A: T.Tensor((256,), "float32"), P: T.Tensor((4,), "float32"),
                       Count: T.Tensor((1,), "int32"), Out: T.Tensor((1,), "float32")):
    """Split reduction: each block writes its partial sum; the block that takes the count
    to 4 (an atomic that returns it) adds the partials."""
    with T.Kernel(4, threads=64) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((64,), "float32")
        T.copy(A[bx * 64:(bx + 1) * 64], S)
        if tx == 0:
            total = T.alloc_var("float32")
            total = 0.0
            for k in T.serial(64):
                total += S[k]
            P[bx] = total
            seen = T.atomic_add(Count[0], 1, return_prev=True)
            if seen == 3:
                Out[0] = P[0] + P[1] + P[2] + P[3]


@T.prim_func
def serial_split_k(A: T.Tensor((4, 64), "float32"), Sem: T.Tensor((1,), "int32"),
                   C: T.Tensor((64,), "float32")):
    """CUTLASS's serial split-K: split bx waits until the semaphore reads bx (an atomic
    load), adds its part into C and hands the semaphore on: the read-modify-writes of C
    are ordered."""
    with T.Kernel(4, threads=64) as bx:
        tx = T.get_thread_binding()
        if bx == 0:
            C[tx] = A[0, tx]
        else:
            while T.atomic_load(Sem[0]) != bx:
                pass
            C[tx] = C[tx] + A[bx, tx]
        T.sync_threads()
        if tx == 0:
            T.atomic_store(Sem[0], bx + 1)


@T.prim_func
def last_block_resets(A: T.Tensor((4,), "float32"), P: T.Tensor((4,), "float32"),
                      Count: T.Tensor((1,), "int32"), Out: T.Tensor((1,), "float32")):
    """The last block reduces the partials and clears the workspace for the next launch."""
    with T.Kernel(4, threads=32) as bx:
        tx = T.get_thread_binding()
        if tx == 0:
            P[bx] = A[bx] * 2.0
            if T.atomic_add(Count[0], 1, return_prev=True) == 3:
                Out[0] = P[0] + P[1] + P[2] + P[3]
                for k in T.serial(4):
                    P[k] = 0.0
                Count[0] = 0


@T.prim_func
def hands_rows_across_the_cluster(A: T.Tensor((128,), "float32"),
                                  B: T.Tensor((128,), "float32")):
    """Rank 0 writes its row; past the cluster barrier (release, acquire) rank 1 reads it
    and clears it."""
    with T.ClusterKernel(4, threads=32, cluster_dims=2) as bx:
        rank = T.block_rank_in_cluster()
        if rank == 0:
            for i in T.Parallel(32):
                A[bx * 32 + i] = bx + i
        T.cluster_sync()
        if rank == 1:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[(bx - 1) * 32 + i] * 2.0
                A[(bx - 1) * 32 + i] = 0.0


@T.prim_func
def reads_the_other_clusters_row(A: T.Tensor((128,), "float32"),
                                 B: T.Tensor((128,), "float32")):
    with T.ClusterKernel(4, threads=32, cluster_dims=2) as bx:
        for i in T.Parallel(32):
            A[bx * 32 + i] = bx + i
        T.cluster_sync()
        for i in T.Parallel(32):
            B[bx * 32 + i] = A[(bx + 2) % 4 * 32 + i]


@T.prim_func
def one_role_acquires_another_reads(A: T.Tensor((32,), "float32"),
                                    Flag: T.Tensor((1,), "int32"),
                                    B: T.Tensor((32,), "float32")):
    """Role 0 of block 1 spins on block 0's flag, role 1 then (an mbarrier) reads block
    0's row: the acquire orders the whole block."""
    with T.Kernel(2, threads=256) as bx:
        bar = T.alloc_barrier([128])
        with T.ws(0):
            if bx == 0:
                for i in T.Parallel(32):
                    A[i] = i
                T.atomic_add(Flag[0], 1)
            else:
                while T.atomic_load(Flag[0]) == 0:
                    pass
            T.mbarrier_arrive(bar[0])
        with T.ws(1):
            T.mbarrier_wait_parity(bar[0], 0)
            if bx == 1:
                for i in T.Parallel(32):
                    B[i] = A[i] + 1.0


def _run(kernel, *args):
    tilejit.compile(kernel, target="llvm")(*args)


def test_two_blocks_writing_different_values_is_a_race():
    with pytest.raises(BlockRaceError) as e:
        _run(every_block_writes_the_row, torch.randn(256), torch.zeros(64))
    text = str(e.value)
    assert "race on tensor 'B', element (0,)" in text
    assert "blocks (0, 0, 0) and (1, 0, 0) of one launch write it different values" in text
    assert text.count("test_block_races.py\", line 16") == 2


def test_blocks_writing_the_same_values_pass():
    a, b = torch.randn(256), torch.zeros(64)
    _run(every_block_writes_the_same, a, b)
    assert torch.equal(b, a[:64] * 2)


def test_a_read_of_another_blocks_write_is_a_race():
    with pytest.raises(BlockRaceError, match=r"block \(3, 0, 0\) reads it after block "
                                             r"\(0, 0, 0\) of the same launch wrote it"):
        _run(reads_the_next_blocks, torch.randn(256))


def test_a_read_of_a_write_that_left_the_value_passes():
    a, b = torch.rand(256), torch.zeros(256)       # all >= 0: the max leaves each as it is
    _run(clamps_then_reads_the_next_blocks, a, b)
    assert torch.equal(b, torch.roll(a, -64))
    a2 = a.clone()
    a2[10] = -1.0                                  # block 0 changes it, block 3 reads it
    with pytest.raises(BlockRaceError, match=r"element \(10,\): block \(3, 0, 0\) reads it "
                                             r"after block \(0, 0, 0\)"):
        _run(clamps_then_reads_the_next_blocks, a2, b)


def test_each_block_its_own_elements_through_shared_memory():
    a, b = torch.randn(256), torch.zeros(256)
    want = a.clone()
    _run(copies_through_shared, a, b)
    assert torch.equal(b, want) and torch.equal(a, want)


def test_overlapping_tiles_are_a_race():
    with pytest.raises(BlockRaceError, match=r"race on tensor 'B', element \(64,\): blocks "
                                             r"\(0, 0, 0\) and \(1, 0, 0\)"):
        _run(tiles_overlap, torch.randn(320), torch.zeros(320))


def test_atomics_from_every_block_pass():
    a, b = torch.randn(256), torch.zeros(1)
    _run(sums_atomically, a, b)
    torch.testing.assert_close(b.double(), a.double().sum().reshape(1), rtol=1e-5, atol=1e-4)


def test_a_block_that_acquires_orders_its_reads():
    a = torch.randn(256)
    p, count, out = torch.zeros(4), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    _run(last_block_reduces, a, p, count, out)
    assert count.item() == 4
    torch.testing.assert_close(out.double(), a.double().sum().reshape(1), rtol=1e-5,
                               atol=1e-4)


def test_a_semaphore_orders_the_writes_of_its_holders():
    a, sem, c = torch.randn(4, 64), torch.zeros(1, dtype=torch.int32), torch.zeros(64)
    _run(serial_split_k, a, sem, c)
    assert sem.item() == 4
    torch.testing.assert_close(c, a.sum(0))


def test_the_last_block_rewrites_what_the_others_wrote():
    a, p = torch.randn(4), torch.zeros(4)
    count, out = torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    for _ in range(2):                      # the workspace cleared for the next launch
        _run(last_block_resets, a, p, count, out)
        assert count.item() == 0 and torch.equal(p, torch.zeros(4))
        torch.testing.assert_close(out, (a * 2).sum().reshape(1))


def test_a_cluster_barrier_orders_the_clusters_blocks():
    a, b = torch.zeros(128), torch.zeros(128)
    _run(hands_rows_across_the_cluster, a, b)
    want = torch.arange(32.0) * 2
    assert torch.equal(b[32:64], want) and torch.equal(b[96:], want + 4)
    assert torch.equal(a, torch.zeros(128))
    with pytest.raises(BlockRaceError, match=r"block \(2, 0, 0\) reads it after block "
                                             r"\(0, 0, 0\)"):
        _run(reads_the_other_clusters_row, torch.zeros(128), torch.zeros(128))


def test_an_acquire_orders_the_other_roles_of_the_block():
    a, flag, b = torch.zeros(32), torch.zeros(1, dtype=torch.int32), torch.zeros(32)
    _run(one_role_acquires_another_reads, a, flag, b)
    assert torch.equal(b, torch.arange(32.0) + 1)

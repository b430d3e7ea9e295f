"""A producer warp under a thread-dependent branch (``if tx >= 128 and tx < 160:``)
waiting on and arriving at mbarriers, beside a ``T.ws(0)`` consumer role (a GQA
kernel's shape): a branch no active thread takes is not run (the consumer role's threads
never wait on the producer's barriers), and an mbarrier array indexed by per-thread code
(``free[k % 2]`` with k a loop over a thread's ``T.alloc_var``) is the one barrier every
active thread names. In simulation, in PTX through ptxas, and on the GPU."""
import pytest
import torch

import tilejit
import tilejit.language as T


def ring(loop_var: bool):
    """The producer hands each row to the output once the consumer has freed its slot: a
    handshake through global memory (a shared tile written by the producer's branch would
    take a block barrier the compiler puts inside the branch: not this test's matter)."""
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32"),
             C: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=256):
            full = T.alloc_barrier([32] * 2)
            free = T.alloc_barrier([128] * 2)
            n = T.alloc_var("int32", init=4)
            tx = T.get_thread_binding()
            if tx >= 128 and tx < 160:
                for k in T.serial(n if loop_var else 4):
                    T.mbarrier_wait_parity(free[k % 2], ((k // 2) % 2) ^ 1)
                    for j in T.serial(2):
                        B[k, (tx - 128) * 2 + j] = A[k, (tx - 128) * 2 + j] * 2
                    T.mbarrier_arrive(full[k % 2])
            with T.ws(0):
                for k in T.serial(4):
                    T.mbarrier_wait_parity(full[k % 2], (k // 2) % 2)
                    if tx == 0:
                        C[k] = k + 1
                    T.mbarrier_arrive(free[k % 2])
    return main


@pytest.mark.parametrize("loop_var", [False, True])
def test_a_producer_branch_beside_a_consumer_role(loop_var, ptxas):
    a = torch.randn(4, 64)
    b, c = tilejit.compile(ring(loop_var), out_idx=[1, 2], target="sim")(a)
    assert torch.equal(b, a * 2) and c.tolist() == [1, 2, 3, 4]
    ptx = tilejit.compile(ring(loop_var), out_idx=[1, 2], target="cuda -arch=sm_90a")\
        .get_kernel_source()
    # block barriers only after the mbarriers' initialization, before the branches (one in
    # the producer's branch would hang the block)
    assert "bar.sync" not in ptx[ptx.index("mbarrier.try_wait"):]
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("loop_var", [False, True])
def test_a_producer_branch_beside_a_consumer_role_on_the_gpu(loop_var):
    a = torch.randn(4, 64)
    b, c = tilejit.compile(ring(loop_var), out_idx=[1, 2])(a.cuda())
    sim_b, sim_c = tilejit.compile(ring(loop_var), out_idx=[1, 2], target="sim")(a)
    assert torch.equal(b.cpu(), a * 2) and torch.equal(sim_b, a * 2)
    assert c.cpu().tolist() == [1, 2, 3, 4] == sim_c.tolist()


def shared_ring():
    """The handshake through a shared tile: the producer's stores need a barrier of the
    block's threads inside its branch (the compiler orders shared-memory accesses with
    barriers; TileLang's program turns that off with TL_DISABLE_THREAD_STORAGE_SYNC)."""
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared([2, 64], "float32")
            full = T.alloc_barrier([32] * 2)
            free = T.alloc_barrier([128] * 2)
            tx = T.get_thread_binding()
            if tx >= 128 and tx < 160:  # marker: producer
                for k in T.serial(4):
                    T.mbarrier_wait_parity(free[k % 2], ((k // 2) % 2) ^ 1)
                    for j in T.serial(2):
                        S[k % 2, (tx - 128) * 2 + j] = A[k, (tx - 128) * 2 + j]
                    T.mbarrier_arrive(full[k % 2])
            with T.ws(0):
                for k in T.serial(4):
                    T.mbarrier_wait_parity(full[k % 2], (k // 2) % 2)
                    if tx < 64:
                        B[k, tx] = S[k % 2, tx] * 2
                    T.mbarrier_arrive(free[k % 2])
    return main


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_a_barrier_inside_a_thread_branch_is_refused(target):
    """It hung the GPU (every thread of the block waits at a barrier 32 of them reach);
    the simulator ran it. Both refuse it now, naming the branch."""
    with pytest.raises(tilejit.CompileError, match=r"this branch depends on the thread "
                                                   r"index, .*\(the GPU would hang\)") as info:
        kernel = tilejit.compile(shared_ring(), out_idx=[1], target=target)
        if target == "sim":
            kernel(torch.randn(4, 64))
        else:
            kernel.get_kernel_source()
    assert "marker: producer" in str(info.value)


def guarded_copy(guard):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            if tx < guard:
                T.copy(A, S)
                for i in T.Parallel(128):
                    B[i] = S[127 - i]
    return main


@pytest.mark.parametrize("guard", [128, 64])
def test_a_branch_every_thread_takes_keeps_its_barrier(guard, ptxas):
    """``if tx < 128`` in a block of 128 threads: every thread reaches the barrier inside
    (the block's); ``if tx < 64``: the branch's tile operations are those 64 threads'
    (thread_ranges.py), with their own named barrier. Neither is refused."""
    a = torch.randn(128)
    got = tilejit.compile(guarded_copy(guard), out_idx=[1], target="sim")(a)
    assert torch.equal(got, a.flip(0))
    ptx = tilejit.compile(guarded_copy(guard), out_idx=[1], target="cuda -arch=sm_80")\
        .get_kernel_source()
    assert ("bar.sync \t0;" in ptx) == (guard == 128)
    ptxas(ptx, "sm_80")


@pytest.mark.gpu
def test_a_branch_every_thread_takes_on_the_gpu():
    a = torch.randn(128)
    for guard in (128, 64):
        got = tilejit.compile(guarded_copy(guard), out_idx=[1])(a.cuda())
        assert torch.equal(got.cpu(), a.flip(0))

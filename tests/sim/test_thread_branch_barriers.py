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
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared([2, 64], "float32")
            full = T.alloc_barrier([32] * 2)
            free = T.alloc_barrier([128] * 2)
            n = T.alloc_var("int32", init=4)
            tx = T.get_thread_binding()
            if tx >= 128 and tx < 160:
                for k in T.serial(n if loop_var else 4):
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


@pytest.mark.parametrize("loop_var", [False, True])
def test_a_producer_branch_beside_a_consumer_role(loop_var, ptxas):
    a = torch.randn(4, 64)
    b = tilejit.compile(ring(loop_var), out_idx=[1], target="sim")(a)
    assert torch.equal(b, a * 2)
    ptxas(tilejit.compile(ring(loop_var), out_idx=[1], target="cuda -arch=sm_90a")
          .get_kernel_source(), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("loop_var", [False, True])
def test_a_producer_branch_beside_a_consumer_role_on_the_gpu(loop_var):
    a = torch.randn(4, 64)
    b = tilejit.compile(ring(loop_var), out_idx=[1])(a.cuda())
    sim = tilejit.compile(ring(loop_var), out_idx=[1], target="sim")(a)
    assert torch.equal(b.cpu(), a * 2) and torch.equal(sim, a * 2)

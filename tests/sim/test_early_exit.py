"""A thread's early exit under a condition on its index (``if tx >= n: return``,
``T.thread_return()``): in the simulator the statements after it run for the lanes
still alive (sim/lane_loops.kernel_body, as a loop's ``break``); a barrier after an exit
some threads took is refused where it is written (the compiler's check: the GPU's
barrier would wait for threads that left)."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[1])
def clamp_doubled(N=100):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx >= N:
                Y[tx] = -1.0
                return
            v = X[tx] * 2
            if v < 0:
                Y[tx] = 0.0
                T.thread_return()
            Y[tx] = v
    return main


@tilelang.jit(out_idx=[1])
def barrier_after_exit(N=100):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            if tx >= N:
                return
            s[tx] = X[tx]
            T.sync_threads()
            Y[tx] = s[127 - tx]
    return main


def _expected(x):
    return torch.cat([torch.clamp(x * 2, min=0), -torch.ones(128 - x.numel())])


def test_the_threads_still_alive_run_the_rest():
    x = torch.randn(100)
    torch.testing.assert_close(clamp_doubled()(x), _expected(x))


def test_a_barrier_after_an_exit_some_threads_took_is_refused():
    with pytest.raises(tilejit.CompileError, match=r"T.sync_threads\(\) inside a branch or "
                       r"loop that depends on the thread index"):
        barrier_after_exit()(torch.randn(100))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(clamp_doubled().get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x = torch.randn(100)
    got = clamp_doubled()(x.cuda()).cpu()
    torch.testing.assert_close(got, _expected(x))
    torch.testing.assert_close(got, clamp_doubled()(x))

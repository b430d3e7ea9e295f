"""A name a T.Parallel body binds goes out of scope with the loop (TileLang's let): bound
again in per-thread code under a branch, it has no old value from the loop's
iterations (a direct-convolution port reuses `n_idx` so; sim/runtime.blend)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[1])
def rebound(N=64):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((N,), "float32")
            tid = T.get_thread_binding(0)
            for i in T.Parallel(N):
                v = X[i] * 2.0            # one value per iteration: 64 over 32 threads
                s[i] = v
            for sub in T.serial(2):
                j = tid * 2 + sub
                if j < N:
                    v = s[j] + 1.0        # per-thread, under a branch
                    Y[j] = v
    return main


def test_a_name_bound_in_a_parallel_then_under_a_per_thread_branch():
    x = torch.randn(64)
    torch.testing.assert_close(rebound()(x), x * 2 + 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(rebound().get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x = torch.randn(64)
    got = rebound()(x.cuda()).cpu()
    torch.testing.assert_close(got.double(), x.double() * 2 + 1)
    torch.testing.assert_close(got, rebound()(x))

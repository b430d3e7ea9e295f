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
            T.sync_threads()
        T.copy(S, A)


@pytest.mark.parametrize("kernel,match", [
    (barrier_after_a_divergent_continue, "depends on the thread index"),
    (barrier_in_a_per_thread_loop, "depends on the thread index"),
    (barrier_in_a_parallel_loop, "inside a T.Parallel loop")])
def test_barriers_not_every_thread_reaches_are_errors(kernel, match):
    with pytest.raises(CompileError, match=match):
        kernel.compile(np.zeros(64, np.float32), target="cuda", arch="sm_90a")

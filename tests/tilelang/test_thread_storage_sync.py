"""TileLang's ``TL_DISABLE_THREAD_STORAGE_SYNC``: the compiler inserts no block barrier for
shared memory, and the kernel's own ``T.sync_threads()`` are its only ones (in a
``T.ws`` role, the role's); a named barrier id a role does not synchronize on is the
kernel's to use (passes/barriers.py, passes/named_barriers.py)."""
import re

import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.options import compile_options
from tilejit.tilelang.jit import PassConfigKey, pass_config_options

OFF = {PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}


def reverse(n=256, own_sync=True):
    """B = A reversed through a shared tile: each thread writes its element and reads
    another thread's, so a barrier must come between (the kernel's own, or none)."""
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            S = T.alloc_shared((n,), T.float32)
            S[tx] = A[tx] * 2
            if own_sync:
                T.sync_threads()
            B[tx] = S[n - 1 - tx]
    return main


def role_handoff(D=128, bar=2):
    """Two warpgroup roles hand a shared row over on named barrier ``bar`` (256
    threads): role 1 stores it, role 0 doubles it into B. Role 1 also reads back its own
    stores through the tile, which, with the compiler's barriers on, synchronizes role 1
    on named barrier 2 (its 1 + k)."""
    @T.prim_func
    def main(A: T.Tensor((1, D), T.float32), B: T.Tensor((1, D), T.float32),
             C: T.Tensor((1, D), T.float32)):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((1, D), T.float32)
            mine = T.alloc_shared((1, D), T.float32)
            with T.ws(1):
                T.copy(A, buf)
                T.copy(A, mine)
                T.copy(mine, C)
                T.named_barrier_arrive(bar, 256)
            with T.ws(0):
                T.sync_threads(bar, 256)
                for i, j in T.Parallel(1, D):
                    B[i, j] = buf[i, j] * 2
    return main


def pipelined_gemm(M=256, N=256, K=256):
    """A TMA pipeline the compiler warp-specializes on sm_90a, with the kernel's own
    T.sync_threads() in the consumers' loop."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            As = T.alloc_shared((128, 64), T.float16)
            Bs = T.alloc_shared((64, 128), T.float16)
            Cf = T.alloc_fragment((128, 128), T.float32)
            T.clear(Cf)
            for k in T.Pipelined(K // 64, num_stages=3):
                T.copy(A[by * 128, k * 64], As)
                T.copy(B[k * 64, bx * 128], Bs)
                T.gemm(As, Bs, Cf)
                T.sync_threads()
            T.copy(Cf, C[by * 128, bx * 128])
    return main


def _barriers(ptx):
    return len(re.findall(r"\b(?:bar|barrier)(?:\.cta)?\.sync", ptx))


def test_the_kernels_own_barrier_is_its_only_one(ptxas):
    on = tilelang.compile(reverse(), target="cuda -arch=sm_90a").get_kernel_source()
    off = tilelang.compile(reverse(), target="cuda -arch=sm_90a",
                           pass_configs=OFF).get_kernel_source()
    assert _barriers(on) == _barriers(off) == 1
    bare = tilelang.compile(reverse(own_sync=False), target="cuda -arch=sm_90a",
                            pass_configs=OFF).get_kernel_source()
    auto = tilelang.compile(reverse(own_sync=False),
                            target="cuda -arch=sm_90a").get_kernel_source()
    assert _barriers(bare) == 0 and _barriers(auto) == 1
    for ptx in (off, bare):
        for arch in ("sm_80", "sm_90a"):
            ptxas(ptx.replace(".target sm_90a", f".target {arch}"), arch)


def test_with_its_own_barrier_it_runs_in_the_simulator():
    a = torch.randn(256)
    b = tilelang.compile(reverse(), out_idx=[1], target="sim", pass_configs=OFF)(a)
    torch.testing.assert_close(b, (a * 2).flip(0))


def test_the_option_keys_the_compilation():
    assert pass_config_options(OFF)["switches"]["thread_sync"] is False
    assert "thread_sync" not in pass_config_options({})["switches"]
    assert compile_options(thread_sync=False).key() != compile_options().key()


def test_in_warp_specialized_consumers_it_is_the_consumers_barrier(ptxas):
    """The producer warpgroup never reaches the consumers' barriers: the kernel's own
    T.sync_threads() there is theirs (named barrier 1 over the consumers' 128 threads), as
    with the compiler's barriers on."""
    ptx = tilelang.compile(pipelined_gemm(), target="cuda -arch=sm_90a",
                           pass_configs=OFF).get_kernel_source()
    assert "setmaxnreg" in ptx and "bar.sync 1, 128" in ptx
    ptxas(ptx, "sm_90a")


def test_a_roles_own_barrier_id_is_refused_while_it_synchronizes_there():
    with pytest.raises(CompileError, match=r"named barrier 2 is warpgroup role 1's "
                                           r"\(T.ws\(1\)\) in this kernel"):
        tilelang.compile(role_handoff(), target="cuda -arch=sm_90a")


def test_with_the_barriers_off_the_roles_id_is_the_kernels(ptxas):
    kernel = tilelang.compile(role_handoff(), target="cuda -arch=sm_90a", pass_configs=OFF)
    ptx = kernel.get_kernel_source()
    assert "barrier.arrive" in ptx and "bar.sync \t2, 128" not in ptx
    ptxas(ptx, "sm_90a")
    a = np.arange(128, dtype=np.float32).reshape(1, 128)
    b, c = np.zeros_like(a), np.zeros_like(a)
    tilelang.compile(role_handoff(), target="sim", pass_configs=OFF)(a, b, c)
    np.testing.assert_array_equal(b, 2 * a)
    np.testing.assert_array_equal(c, a)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    a = torch.randn(256)
    kernel = tilelang.compile(reverse(), out_idx=[1], target="cuda", pass_configs=OFF)
    b = kernel(a.cuda()).cpu()
    sim = tilelang.compile(reverse(), out_idx=[1], target="sim", pass_configs=OFF)(a)
    torch.testing.assert_close(b, (a * 2).flip(0))
    assert torch.equal(b, sim)
    x = torch.arange(128, dtype=torch.float32).reshape(1, 128)
    y, z = torch.zeros_like(x).cuda(), torch.zeros_like(x).cuda()
    tilelang.compile(role_handoff(), target="cuda", pass_configs=OFF)(x.cuda(), y, z)
    assert torch.equal(y.cpu(), 2 * x) and torch.equal(z.cpu(), x)

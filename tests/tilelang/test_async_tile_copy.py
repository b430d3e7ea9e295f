"""TileLang's ``T.async_copy`` (a global region into a shared tile, not waited for) with
``T.ptx_wait_group``: a tile used while its copy may be in flight is a CompileError at
that line, along every path (``frontend/async_tile_copies.py``); a program that waits is
the same kernel as with ``T.copy`` (TileLang's own equivalence test, on sm_80 and
sm_90a), checked against torch in the simulator and on the device."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


def relu_matmul(M, N, K, block_M=128, block_N=128, block_K=32, asynchronous=True):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                if asynchronous:
                    T.async_copy(A[by * block_M, ko * block_K], A_shared)
                    T.ptx_wait_group(0)
                    T.async_copy(B[ko * block_K, bx * block_N], B_shared)
                    T.ptx_wait_group(0)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def _ptx(func, arch):
    return tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()


def test_the_waited_copy_computes_the_product():
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    c = torch.zeros(256, 256).half()
    tilelang.compile(relu_matmul(256, 256, 128), target="sim")(a, b, c)
    torch.testing.assert_close(c, torch.relu(a.double() @ b.double()).half(), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_async_copy_and_wait_is_the_copys_kernel(arch, ptxas):
    ptx = _ptx(relu_matmul(256, 256, 128), arch)
    assert ptx == _ptx(relu_matmul(256, 256, 128, asynchronous=False), arch)
    if arch == "sm_80":
        assert "cp.async" in ptx
    ptxas(ptx, arch)


def _compile(func):
    return tilelang.compile(func, target="sim")


def test_a_tile_used_before_its_wait_is_an_error():
    @T.prim_func
    def early(A: T.Tensor((4,), T.float16), B: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.copy(S, B[0:4])
    with pytest.raises(tilejit.CompileError, match=r"'S' is used while the T.async_copy into "
                       r"it \(line \d+\) may still be in flight") as info:
        _compile(early)
    assert "T.copy(S, B[0:4])" in str(info.value)

    @T.prim_func
    def waits_for_the_older_only(A: T.Tensor((8,), T.float16), B: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            R = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.async_copy(A[4:8], R)
            T.ptx_wait_group(1)             # S has landed; R may not have
            T.copy(S, B[0:4])
            T.copy(R, B[4:8])
    with pytest.raises(tilejit.CompileError, match="'R' is used while"):
        _compile(waits_for_the_older_only)


def test_a_copy_carried_into_the_next_iteration_is_checked():
    @T.prim_func
    def prefetch(A: T.Tensor((512,), T.float32), B: T.Tensor((512,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            T.async_copy(A[0:128], S)
            for k in T.serial(4):
                T.copy(S, B[k * 128:(k + 1) * 128])     # the next copy is in flight
                if k < 3:
                    T.async_copy(A[(k + 1) * 128:(k + 2) * 128], S)
    with pytest.raises(tilejit.CompileError, match="'S' is used while"):
        _compile(prefetch)

    @T.prim_func
    def prefetch_waited(A: T.Tensor((512,), T.float32), B: T.Tensor((512,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            T.async_copy(A[0:128], S)
            for k in T.serial(4):
                T.ptx_wait_group(0)
                T.copy(S, B[k * 128:(k + 1) * 128])
                if k < 3:
                    T.async_copy(A[(k + 1) * 128:(k + 2) * 128], S)
    a, b = torch.randn(512), torch.zeros(512)
    _compile(prefetch_waited)(a, b)
    assert torch.equal(a, b)


def test_operands_and_arguments_are_checked():
    @T.prim_func
    def shared_to_global(A: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.clear(S)
            T.async_copy(S, A[0:4])
    with pytest.raises(tilejit.CompileError, match=r"copies a region of a global tensor into "
                       r"a shared tile \(cp.async\), got `S` → `A\[0:4\]`"):
        _compile(shared_to_global)

    @T.prim_func
    def bad_wait(A: T.Tensor((4,), T.float16), n: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.ptx_wait_group(n)
    with pytest.raises(tilejit.CompileError, match=r"a non-negative int known at compile"):
        _compile(bad_wait)

    @T.prim_func
    def unknown_keyword(A: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S, disable_tma=True)
    with pytest.raises(tilejit.CompileError, match="unexpected argument 'disable_tma'"):
        _compile(unknown_keyword)


def test_a_copy_never_used_needs_no_wait():
    @T.prim_func
    def unused(A: T.Tensor((130, 32), T.float16), B: T.Tensor((130, 32), T.float16)):
        with T.Kernel(2, threads=128) as pid:
            S = T.alloc_shared((128, 32), T.float16)
            T.async_copy(A[pid * 128:(pid + 1) * 128, 0:32], S)
            B[0, 0] = A[0, 0]
    a, b = torch.randn(130, 32).half(), torch.zeros(130, 32).half()
    _compile(unused)(a, b)
    assert b[0, 0] == a[0, 0]


@pytest.mark.gpu
def test_async_copy_on_the_gpu():
    a = torch.randn(512, 256, device="cuda").half()
    b = torch.randn(256, 384, device="cuda").half()
    c = torch.zeros(512, 384, device="cuda").half()
    tilelang.compile(relu_matmul(512, 384, 256))(a, b, c)
    torch.testing.assert_close(c, torch.relu(a.double() @ b.double()).half(), rtol=1e-2,
                               atol=1e-2)
    sim = torch.zeros(512, 384).half()
    tilelang.compile(relu_matmul(512, 384, 256), target="sim")(a.cpu(), b.cpu(), sim)
    torch.testing.assert_close(c.cpu(), sim, rtol=2e-3, atol=2e-3)


@T.macro
def load(A, S, k):
    T.async_copy(A[k * 128:(k + 1) * 128], S)


def test_a_macros_async_copy_and_a_computed_wait():
    stages = 2

    @T.prim_func
    def in_macro(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            for k in T.serial(2):
                load(A, S, k)
                T.ptx_wait_group(stages - 2)
                T.copy(S, B[k * 128:(k + 1) * 128])
    a, b = torch.randn(256), torch.zeros(256)
    tilelang.compile(in_macro, target="sim")(a, b)
    assert torch.equal(a, b)

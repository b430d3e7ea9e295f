"""A fragment indexed in a ``T.Parallel`` loop at ``X * n + j`` (DeepSeek mHC's
``x_frag[i, jj * 4 + j]``, ``passes/split_indices.py``): through a view splitting the
dimension, whose fixed part the layout holds in slot digits of each thread, also where
a gemm's register operand fixes the layout (digits not one run of slots). The simulator
and the GPU compute the same sums; an index that is not a whole split is reported as
before."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def chunked_squares(X, Fn, O, S, step: T.constexpr = 4, extent: T.constexpr = 4):
    """S[i, j] = sum over jj of X[i, jj*step + j]^2 while X's fragment is also the A
    operand (in registers) of a tf32 gemm that gives O."""
    with T.Kernel(1, threads=128):
        xs = T.alloc_shared((32, 256), T.float32)
        fs = T.alloc_shared((256, 32), T.float32)
        xf = T.alloc_fragment((32, 256), T.float32)
        of = T.alloc_fragment((32, 32), T.float32)
        sq = T.alloc_fragment((32, 4), T.float32)
        T.copy(X, xs)
        T.copy(Fn, fs)
        T.copy(xs, xf)
        T.clear(sq)
        for jj in T.serial(256 // step):
            for i, j in T.Parallel(32, extent):
                sq[i, j] += xf[i, jj * step + j] * xf[i, step * jj + j]
        T.clear(of)
        T.gemm(xf, fs, of)
        T.copy(of, O)
        T.copy(sq, S)


@tilejit.kernel
def row_chunks(A, B):
    """B[i, j] = max over r of A[r * 8 + i, j]: rows split, the fragment a T.Parallel's."""
    with T.Kernel(1, threads=64):
        af = T.alloc_fragment((64, 16), T.float32)
        bf = T.alloc_fragment((8, 16), T.float32)
        T.copy(A, af)
        T.fill(bf, -T.infinity(T.float32))
        for r in T.serial(8):
            for i, j in T.Parallel(8, 16):
                bf[i, j] = T.max(bf[i, j], af[r * 8 + i, j])
        T.copy(bf, B)


def _operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 256)).astype(np.float32),
            rng.standard_normal((256, 32)).astype(np.float32))


def test_the_simulator_sums_the_chunks():
    x, f = _operands()
    o, s = np.zeros((32, 32), np.float32), np.zeros((32, 4), np.float32)
    tilejit.kernel(chunked_squares.func, target="sim")(x, f, o, s)
    np.testing.assert_allclose(s, (x.astype(np.float64) ** 2).reshape(32, 64, 4).sum(1),
                               rtol=1e-5)
    a = np.random.default_rng(1).standard_normal((64, 16)).astype(np.float32)
    b = np.zeros((8, 16), np.float32)
    tilejit.kernel(row_chunks.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, a.reshape(8, 8, 16).max(0))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_assembles(ptxas, arch):
    x, f = _operands()
    ptx = chunked_squares.compile(x, f, np.zeros((32, 32), np.float32),
                                  np.zeros((32, 4), np.float32), target="cuda", arch=arch).ptx
    ptxas(ptx, arch)
    a = np.zeros((64, 16), np.float32)
    ptxas(row_chunks.compile(a, np.zeros((8, 16), np.float32), target="cuda", arch=arch).ptx,
          arch)


def test_an_index_that_is_not_a_whole_split_is_reported():
    x, f = _operands()
    with pytest.raises(CompileError, match=r"`xf\[i, jj \* step \+ j\]` indexes the "
                                           r"thread-distributed fragment 'xf'"):
        chunked_squares.compile(x, f, np.zeros((32, 32), np.float32),
                                np.zeros((32, 4), np.float32), step=8, extent=4,
                                target="cuda", arch="sm_90a")


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    x, f = _operands()
    o, s = torch.zeros(32, 32, device="cuda"), torch.zeros(32, 4, device="cuda")
    chunked_squares(torch.from_numpy(x).cuda(), torch.from_numpy(f).cuda(), o, s)
    so, ss = np.zeros((32, 32), np.float32), np.zeros((32, 4), np.float32)
    tilejit.kernel(chunked_squares.func, target="sim")(x, f, so, ss)
    np.testing.assert_allclose(s.cpu().numpy(), ss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o.cpu().numpy(), so, rtol=1e-5, atol=1e-4)
    a = torch.randn(64, 16, device="cuda")
    b = torch.zeros(8, 16, device="cuda")
    row_chunks(a, b)
    torch.testing.assert_close(b, a.view(8, 8, 16).amax(0), rtol=0, atol=0)


@tilejit.kernel
def split_inside_the_iteration(X, O):
    """The split's fixed part a serial loop's variable inside the iteration: each thread
    holds every jj of its (i, j) in registers."""
    with T.Kernel(1, threads=128):
        xf = T.alloc_fragment((32, 64), T.float32)
        sq = T.alloc_fragment((32, 4), T.float32)
        T.copy(X, xf)
        T.clear(sq)
        for i, j in T.Parallel(32, 4):
            for jj in T.serial(16):
                sq[i, j] += xf[i, jj * 4 + j]
        T.copy(sq, O)


@tilejit.kernel
def split_of_an_accumulator(Q, O):
    """The same over a wgmma accumulator, whose layout spreads a row over threads."""
    with T.Kernel(1, threads=128):
        qs = T.alloc_shared((64, 64), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        sq = T.alloc_fragment((64, 4), T.float32)
        T.copy(Q, qs)
        T.clear(acc)
        T.gemm(qs, qs, acc, transpose_B=True)
        T.clear(sq)
        for i, j in T.Parallel(64, 4):
            for jj in T.serial(16):
                sq[i, j] += acc[i, jj * 4 + j]
        T.copy(sq, O)


def test_a_split_by_a_serial_loop_inside_the_iteration(ptxas):
    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    o = np.zeros((32, 4), np.float32)
    tilejit.kernel(split_inside_the_iteration.func, target="sim")(x, o)
    np.testing.assert_allclose(o, x.astype(np.float64).reshape(32, 16, 4).sum(1), rtol=1e-5,
                               atol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptxas(split_inside_the_iteration.compile(x, o, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_a_split_by_a_serial_loop_inside_the_iteration_on_the_gpu():
    x = torch.randn(32, 64)
    o = torch.zeros(32, 4, device="cuda")
    split_inside_the_iteration(x.cuda(), o)
    torch.testing.assert_close(o.cpu().double(), x.double().view(32, 16, 4).sum(1),
                               rtol=1e-5, atol=1e-5)


def test_an_error_through_the_split_names_it_as_a_reshape_of_the_fragment():
    q = np.zeros((64, 64), np.float16)
    with pytest.raises(CompileError) as info:
        split_of_an_accumulator.compile(q, np.zeros((64, 4), np.float32), target="cuda",
                                        arch="sm_90a")
    message = str(info.value)
    assert "fragment 'acc.reshape(64, 16, 4)'" in message and "__tj_" not in message
    assert "sq[i, j] += acc[i, jj * 4 + j]" in message        # the line as written
    assert "spreads them over threads" in message


def composable_copy(M, N, block_M, block_N, dtype="float16"):
    """TileLang's composable index: a flat fragment written at ``i * block_N + j`` by a
    loop over (i, j), read back by a flat loop: the write goes through the view
    ``B_local.reshape(block_M, block_N)``."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M * N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_local = T.alloc_fragment([block_M, block_N], dtype)
            B_local = T.alloc_fragment([block_M * block_N], dtype)
            T.copy(A[by * block_M, bx * block_N], A_local)
            for i, j in T.Parallel(block_M, block_N):
                B_local[i * block_N + j] = A_local[i, j]
            for i in T.Parallel(block_M * block_N):
                B[by * block_M * N + bx * block_N + i // block_N * N + i % block_N] = B_local[i]
    return main


def test_a_flat_fragment_indexed_by_a_composed_index():
    a = torch.randn(256, 256).half()
    b = tilejit.compile(composable_copy(256, 256, 128, 128), out_idx=[1], target="sim")(a)
    torch.testing.assert_close(b, a.flatten(), rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        tilejit.compile(composable_copy(256, 256, 128, 128), out_idx=[1],
                        target=f"cuda -arch={arch}").get_kernel_source()


def test_a_composed_index_over_a_row_the_threads_do_not_divide(ptxas):
    """TileLang's composable-index test: 576 columns on 128 threads, which had no
    layout with a digit form (refused); the rows now go to two groups of 64 threads."""
    a = torch.randn(64, 576).half()
    b = tilejit.compile(composable_copy(64, 576, 32, 576), out_idx=[1], target="sim")(a)
    torch.testing.assert_close(b, a.flatten(), rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(composable_copy(64, 576, 32, 576), out_idx=[1],
                              target=f"cuda -arch={arch}").get_kernel_source()
        assert "0 bytes spill stores" in ptxas(ptx, arch)


@pytest.mark.gpu
def test_a_composed_index_over_a_row_the_threads_do_not_divide_on_the_gpu():
    a = torch.randn(64, 576, device="cuda").half()
    b = tilejit.compile(composable_copy(64, 576, 32, 576), out_idx=[1], target="cuda")(a)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a.flatten(), rtol=0, atol=0)


@pytest.mark.gpu
def test_a_flat_fragment_indexed_by_a_composed_index_on_the_gpu():
    a = torch.randn(1024, 1024, device="cuda").half()
    b = tilejit.compile(composable_copy(1024, 1024, 128, 128), out_idx=[1], target="cuda")(a)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a.flatten(), rtol=0, atol=0)


@tilejit.kernel
def gated_chunks(A, Bm, G, O):
    """flash-linear-attention's RWKV6 intra-chunk pattern: a 1-d fragment of gates read at
    ``kb * 32 + c`` through a name the body binds (``k_idx = kb * 32 + c``), by a loop
    writing a gemm's register operand and by one writing a shared tile (no fragment there
    indexed with all the loop's indices: the loop follows the gate fragment)."""
    with T.Kernel(1, threads=32):
        gf = T.alloc_fragment((64,), T.float32)
        x = T.alloc_fragment((16, 32), T.float32)
        bs = T.alloc_shared((16, 32), T.float32)
        acc = T.alloc_fragment((16, 16), T.float32)
        T.clear(acc)
        for c in T.Parallel(64):
            gf[c] = G[c]
        for kb in T.serial(2):
            for i, c in T.Parallel(16, 32):
                k_idx = kb * 32 + c
                x[i, c] = A[i, k_idx] * gf[k_idx]
            for j, c in T.Parallel(16, 32):
                bs[j, c] = Bm[j, kb * 32 + c] * gf[kb * 32 + c]
            T.gemm(x, bs, acc, transpose_B=True)
        T.copy(acc, O)


def _gated_operands(device="cpu"):
    g = torch.Generator().manual_seed(3)
    a, bm = torch.randn(16, 64, generator=g), torch.randn(16, 64, generator=g)
    gates = torch.randn(64, generator=g)
    ref = ((a.double() * gates.double()) @ (bm.double() * gates.double()).T).float()
    return [t.to(device) for t in (a, bm, gates)], ref


def test_an_index_bound_to_a_name_and_a_loop_over_a_shared_tile():
    (a, bm, gates), ref = _gated_operands()
    o = torch.zeros(16, 16)
    tilejit.kernel(gated_chunks.func, target="sim")(a, bm, gates, o)
    torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)     # tf32 gemm


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_index_bound_to_a_name_assembles(ptxas, arch):
    (a, bm, gates), _ = _gated_operands()
    ptxas(gated_chunks.compile(a.numpy(), bm.numpy(), gates.numpy(),
                               np.zeros((16, 16), np.float32), target="cuda", arch=arch).ptx,
          arch)


@pytest.mark.gpu
def test_an_index_bound_to_a_name_on_the_gpu():
    (a, bm, gates), ref = _gated_operands("cuda")
    o = torch.zeros(16, 16, device="cuda")
    gated_chunks(a, bm, gates, o)
    so = torch.zeros(16, 16)
    tilejit.kernel(gated_chunks.func, target="sim")(a.cpu(), bm.cpu(), gates.cpu(), so)
    torch.testing.assert_close(o.cpu(), ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(o.cpu(), so, rtol=1e-4, atol=1e-4)

"""TMA stores (passes/tma_store.py): which copies take them, the staging tile's layout,
the synchronization around them in the PTX (assembled by ptxas), and, with ``-m gpu``,
results against torch (float64) and the simulator at sizes TMA clips."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@tilejit.kernel
def gemm_staged(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
                block_K: T.constexpr = 64, threads: T.constexpr = 128,
                stages: T.constexpr = 3):
    """The GEMM as TileLang's Hopper examples write its epilogue: through a shared tile."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C_s)
        T.copy(C_s, C[by * block_M, bx * block_N])


@tilejit.kernel
def tile_copy(X, Y, block: T.constexpr = 64):
    """A 2-d copy through a shared tile: loaded by threads, stored by TMA."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        S = T.alloc_shared((block, block), X.dtype)
        T.copy(X[by * block, bx * block], S)
        T.copy(S, Y[by * block, bx * block])


@tilejit.kernel
def store_then_read(X, Y, block: T.constexpr = 64):
    """Y stored from a shared tile and read back in the same kernel: not a TMA store."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        S = T.alloc_shared((block, block), X.dtype)
        T.copy(X[by * block, bx * block], S)
        T.copy(S, Y[by * block, bx * block])
        T.copy(Y[by * block, bx * block], S)
        T.copy(S, X[by * block, bx * block])


def _compiled(kernel, shapes, dtype, arch, **cfg):
    arrays = [np.zeros(s, dtype) for s in shapes]
    return kernel.compile(*arrays, target="cuda", arch=arch, **cfg).compiled


@pytest.mark.parametrize("out,threads", [(np.float16, 128), (np.float16, 256),
                                         (np.float32, 256)])
def test_a_staged_epilogue_is_stored_by_tma_on_sm90(out, threads, ptxas):
    a = np.zeros((512, 512), np.float16)
    ptx = gemm_staged.compile(a, a.copy(), np.zeros((512, 512), out), target="cuda",
                              arch="sm_90a", threads=threads).ptx
    # one box per column of 128-byte swizzle atoms of the 128-column tile
    assert ptx.count(STORE) == 128 * np.dtype(out).itemsize // 128
    assert "cp.async.bulk.commit_group" in ptx
    # thread 0 waits for TMA's reads before a barrier and before the block exits; the
    # writers fence the async proxy after their stores, before the barrier and the store
    assert "cp.async.bulk.wait_group.read 0" in ptx
    head = ptx[:ptx.index(STORE)]
    assert head.rindex("st.shared") < head.rindex("fence.proxy.async.shared::cta") \
        < head.rindex("bar.sync")
    assert "st.global" not in ptx
    # the accumulator's pairs go to the swizzled tile as 4-byte stores
    assert "st.shared.b16" not in ptx and ("st.shared.v2.b16" in ptx or out == np.float32)
    ptxas(ptx, "sm_90a")


def test_sm80_and_the_switch_keep_the_threads_stores(ptxas, monkeypatch):
    ptx = _compiled(gemm_staged, [(512, 512)] * 3, np.float16, "sm_80").ptx
    assert STORE not in ptx and "st.global.v4" in ptx
    ptxas(ptx, "sm_80")
    monkeypatch.setenv("TILEJIT_TMA", "0")
    assert STORE not in _compiled(gemm_staged, [(512, 512)] * 3, np.float16, "sm_90a").ptx


def test_a_plain_tile_copy_is_stored_by_tma_unswizzled(ptxas):
    k = _compiled(tile_copy, [(256, 256)] * 2, np.float32, "sm_90a")
    assert k.ptx.count(STORE) == 1 and len(k.tensor_maps) == 1
    assert k.tensor_maps[0][-1] == 0          # row-major: no swizzle
    ptxas(k.ptx, "sm_90a")


def test_a_tensor_the_kernel_also_reads_is_not_stored_by_tma():
    assert STORE not in _compiled(store_then_read, [(256, 256)] * 2, np.float32, "sm_90a").ptx


def test_unaligned_rows_keep_the_threads_stores():
    # 100 float16 columns: rows of 200 bytes, not TMA's 16-byte multiple
    a = np.zeros((256, 256), np.float16)
    c = np.zeros((256, 100), np.float16)
    ptx = gemm_staged.compile(a, np.zeros((256, 100), np.float16), c, target="cuda",
                              arch="sm_90a").ptx
    assert STORE not in ptx


GPU_CASES = [
    (M, N, K, dtype, out, cfg)
    for (M, N, K) in [(512, 512, 512), (1000, 776, 520), (136, 264, 64)]
    for dtype, out in [("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "float32")]
    # a 128 x 256 float32 staging tile (128 KiB) leaves room for 2 stages
    for cfg in [dict(), dict(block_N=256, threads=256, stages=2 if out == "float32" else 3),
                dict(block_M=64, block_N=64, stages=2)]
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,out,cfg", GPU_CASES)
def test_staged_gemm_gpu_matches_torch_and_simulator(M, N, K, dtype, out, cfg):
    from tilejit.runtime.cuda_driver import device_arch
    if device_arch(0) != "sm_90a":
        pytest.skip("TMA stores need an sm_90 device")
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g, dtype=torch.float64)
    b = torch.randn(K, N, generator=g, dtype=torch.float64)
    A, B = (x.to(getattr(torch, dtype)) for x in (a, b))
    c = torch.full((M, N), float("nan"), dtype=getattr(torch, out), device="cuda")
    assert STORE in gemm_staged.compile(A.cuda(), B.cuda(), c, **cfg).ptx
    gemm_staged(A.cuda(), B.cuda(), c, **cfg)
    torch.cuda.synchronize()
    ref = A.double() @ B.double()
    got = c.double().cpu()
    assert not got.isnan().any()
    assert ((got - ref).norm() / ref.norm()).item() < 2e-3
    c_sim = torch.zeros(M, N, dtype=getattr(torch, out))
    tilejit.kernel(gemm_staged.func, target="sim")(A, B, c_sim, **cfg)
    np.testing.assert_allclose(got.numpy(), c_sim.double().numpy(), rtol=2e-2, atol=0.1)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,dtype", [(256, 256, torch.float32), (300, 200, torch.float32),
                                       (1000, 72, torch.float16), (64, 8, torch.float16)])
def test_tile_copy_gpu_clips_at_the_edges(M, N, dtype):
    x = torch.randn(M, N, device="cuda").to(dtype)
    y = torch.full_like(x, float("nan"))
    tile_copy(x, y)
    torch.cuda.synchronize()
    assert torch.equal(x, y)
    # the bytes just past the tensor are untouched: a view into a larger buffer
    big = torch.full((M + 8, N), 7.0, device="cuda", dtype=dtype)
    tile_copy(x, big[:M])
    torch.cuda.synchronize()
    assert torch.equal(big[:M], x) and bool((big[M:] == 7).all())

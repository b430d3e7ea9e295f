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
    assert "st.shared.b16" not in ptx and (
        "st.shared.v2.b16" in ptx or "st.shared.b32" in ptx or out == np.float32)
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


# -- the compiler stages a wgmma accumulator's copy to global memory (epilogue_staging.py)

@tilejit.kernel
def gemm_direct(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                block_K: T.constexpr = 64, threads: T.constexpr = 256,
                stages: T.constexpr = 4, accumulate: T.constexpr = False):
    """The GEMM as the seeds write it, the accumulator copied straight to C, or added to
    C (which the kernel then also reads)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        if accumulate:
            T.copy(C[by * block_M, bx * block_N], C_f)
        else:
            T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


@tilejit.kernel
def gemm_direct_persistent(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                           block_K: T.constexpr = 64, threads: T.constexpr = 256,
                           stages: T.constexpr = 4, sms: T.constexpr = 8):
    """The seeds' persistent GEMM with the accumulator copied straight to C."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(sms, threads=threads) as (block_id):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sms,
                                   block_id):
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[bx * block_M, by * block_N])


def _direct(arch="sm_90a", persistent=False, **cfg):
    a = np.zeros((1024, 1024), np.float16)
    kernel = gemm_direct_persistent if persistent else gemm_direct
    return kernel.compile(a, a.copy(), a.copy(), target="cuda", arch=arch, **cfg)


def test_the_accumulator_goes_out_by_tma_in_the_stages_bytes(ptxas):
    """Non-persistent: the staging tile takes the bytes of the stages, dead after the
    loop, so the kernel needs no more shared memory than before (4 stages of 48 KiB and
    8 mbarriers)."""
    h = _direct()
    assert h.ptx.count(STORE) == 4 and "st.global" not in h.ptx
    assert h.shared_bytes == 4 * 48 * 1024 + 8 * 8
    ptxas(h.ptx, "sm_90a")


def test_a_persistent_kernel_stages_when_a_tile_fits():
    # 3 stages (144 KiB) + the 64 KiB staging tile fit; 4 stages (192 KiB) + 64 do not
    assert STORE in _direct(persistent=True, stages=3).ptx
    ptx = _direct(persistent=True, stages=4).ptx
    assert STORE not in ptx and "st.global" in ptx


def test_what_is_not_staged():
    assert STORE not in _direct(accumulate=True).ptx       # C is read too
    assert STORE not in _direct(arch="sm_80", stages=3).ptx  # no wgmma, no TMA
    assert STORE not in _direct(arch="sm_90", stages=3).ptx  # mma.sync


def test_the_switch_turns_staging_off(monkeypatch):
    monkeypatch.setenv("TILEJIT_TMA", "0")
    assert STORE not in _direct().ptx


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,kind,cfg", [
    (1000, 776, 520, "direct", dict()),                     # staged, in the stages' bytes
    (1000, 776, 520, "direct", dict(accumulate=True)),      # not staged: C is read
    (136, 264, 64, "direct", dict(block_N=128, threads=128, stages=2)),
    (1000, 776, 520, "persistent", dict(stages=3)),         # staged, its own tile
    (1000, 776, 520, "persistent", dict(stages=4)),         # does not fit: direct
    (2048, 2048, 256, "persistent", dict(stages=3, sms=132)),
])
def test_a_staged_accumulator_gpu_matches_torch_and_simulator(M, N, K, kind, cfg):
    from tilejit.runtime.cuda_driver import device_arch
    if device_arch(0) != "sm_90a":
        pytest.skip("wgmma needs an sm_90 device")
    kernel = gemm_direct_persistent if kind == "persistent" else gemm_direct
    g = torch.Generator().manual_seed(M + N + K)
    A = torch.randn(M, K, generator=g).half()
    B = torch.randn(K, N, generator=g).half()
    C0 = torch.randn(M, N, generator=g).half()
    c = C0.cuda() if cfg.get("accumulate") else torch.full((M, N), float("nan"),
                                                           dtype=torch.float16, device="cuda")
    staged = STORE in kernel.compile(A.cuda(), B.cuda(), c, **cfg).ptx
    assert staged == (not cfg.get("accumulate") and cfg.get("stages") != 4)
    kernel(A.cuda(), B.cuda(), c, **cfg)
    torch.cuda.synchronize()
    ref = A.double() @ B.double() + (C0.double() if cfg.get("accumulate") else 0)
    got = c.double().cpu()
    assert ((got - ref).norm() / ref.norm()).item() < 2e-3
    if M * N * K <= 1000 * 776 * 520:
        c_sim = C0.clone() if cfg.get("accumulate") else torch.zeros(M, N, dtype=torch.float16)
        tilejit.kernel(kernel.func, target="sim")(A, B, c_sim, **cfg)
        np.testing.assert_allclose(got.numpy(), c_sim.double().numpy(), rtol=2e-2, atol=0.1)

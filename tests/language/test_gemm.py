"""T.gemm on mma.sync: every dtype pair, both transposes, each warp policy, 128 and 256
threads, shapes that are not multiples of the block. In simulation against float64
(torch) and, with ``-m gpu``, on the device against torch and against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from kernels import TORCH, gemm
from kernels import gemm_inputs as _inputs

gemm_sim = tilejit.kernel(gemm.func, target="sim")   # the same kernel, simulated

PAIRS = [("float16", "float32"), ("float16", "float16"), ("bfloat16", "float32"),
         ("float32", "float32"), ("int8", "int32")]


def _check(c, a, b, dtype, acc, K):
    ref = a.double() @ b.double()
    got = c.double().cpu()
    if dtype == "int8":
        assert torch.equal(got, ref), (got - ref).abs().max()
        return
    tol = {"float32": 1e-2, "float16": 1e-2}[acc] if dtype != "float32" else 5e-3 * K ** 0.5
    if acc == "float16":
        tol = 2e-2 * K ** 0.5 / 4
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-2, atol=max(tol, 1e-2))


def _config(dtype, acc, block_K=None, **kw):
    bk = block_K or {"int8": 64, "float32": 16}.get(dtype, 32)
    return dict(block_K=bk, acc=acc, **kw)


SIM_CASES = [
    # (M, N, K, dtype, acc, options)
    (128, 128, 64, "float16", "float32", {}),
    (200, 150, 96, "float16", "float32", {}),
    (100, 77, 51, "float16", "float32", {"trans_A": True}),
    (100, 77, 51, "bfloat16", "float32", {"trans_B": True}),
    (64, 64, 64, "float16", "float16", {"block_M": 64, "block_N": 64}),
    (96, 80, 40, "float32", "float32", {"block_M": 64, "block_N": 64}),
    (64, 96, 96, "int8", "int32", {"block_M": 64, "block_N": 64}),
    (130, 130, 32, "float16", "float32", {"policy": "FullRow", "threads": 256}),
    (128, 128, 200, "float16", "float32", {"stages": 3}),
    (128, 128, 32, "float16", "float32", {"stages": 4}),
    (400, 300, 64, "float16", "float32", {"block_M": 64, "block_N": 64, "panel": 0}),
]


@pytest.mark.parametrize("M,N,K,dtype,acc,opts", SIM_CASES)
def test_gemm_simulated(M, N, K, dtype, acc, opts):
    a, b, A, B = _inputs(M, N, K, dtype, opts.get("trans_A", False), opts.get("trans_B", False))
    c = torch.zeros(M, N, dtype=TORCH[acc])
    gemm(A, B, c, **_config(dtype, acc, **opts))
    _check(c, a, b, dtype, acc, K)


GPU_CASES = [
    (M, N, K, dtype, acc, opts)
    for (dtype, acc) in PAIRS
    for (M, N, K) in [(512, 512, 512), (384, 256, 640), (1000, 777, 513)]
    for opts in [{}, {"trans_A": True}, {"trans_B": True}, {"trans_A": True, "trans_B": True}]
    if not (dtype in ("float32", "int8") and opts and (M, N, K) == (384, 256, 640))
] + [
    (1000, 777, 513, "float16", "float32", {"policy": p, "threads": t})
    for p in ("Square", "FullRow", "FullCol") for t in (128, 256)
] + [
    (512, 512, 256, "float16", "float32", {"block_M": bm, "block_N": bn, "block_K": bk,
                                           "threads": t})
    for bm, bn, bk, t in [(64, 64, 32, 128), (128, 256, 32, 256), (256, 128, 64, 256),
                          (64, 128, 64, 128), (128, 64, 16, 128)]
] + [
    # the software pipeline: 0 … 4 stages, fewer K steps than stages, K not a multiple
    # of block_K, misaligned rows (the synchronous fallback of the async copies)
    (M, N, K, dtype, "float32", {"stages": s})
    for s in (0, 1, 2, 3, 4)
    for (M, N, K, dtype) in [(512, 384, 1024, "float16"), (256, 256, 64, "float16"),
                             (300, 260, 100, "bfloat16"), (256, 256, 517, "float16")]
] + [
    # block rasterization: panels that do and do not divide the grid, both orders
    (M, N, 256, "float16", "float32", {"block_M": 64, "block_N": 64, "panel": p})
    for (M, N) in [(1000, 700), (640, 1280)] for p in (1, 3, 8, 0)
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,acc,opts", GPU_CASES)
def test_gemm_gpu_matches_torch_and_simulator(M, N, K, dtype, acc, opts):
    a, b, A, B = _inputs(M, N, K, dtype, opts.get("trans_A", False), opts.get("trans_B", False),
                         device="cuda")
    c = torch.zeros(M, N, dtype=TORCH[acc], device="cuda")
    cfg = _config(dtype, acc, **opts)
    gemm(A, B, c, **cfg)
    torch.cuda.synchronize()
    _check(c, a, b, dtype, acc, K)
    if M * N * K <= 256 * 1024 * 1024:
        c_sim = torch.zeros(M, N, dtype=TORCH[acc])
        gemm_sim(A.cpu(), B.cpu(), c_sim, **cfg)
        tol = 0 if dtype == "int8" else 2e-2
        np.testing.assert_allclose(c.double().cpu().numpy(), c_sim.double().numpy(),
                                   rtol=tol, atol=tol * 5)


def test_gemm_ptx_uses_tensor_cores_for_every_dtype():
    for dtype, acc in PAIRS:
        a, b, A, B = _inputs(256, 256, 256, dtype, False, False)
        c = torch.zeros(256, 256, dtype=TORCH[acc])
        ptx = gemm.compile(A, B, c, target="cuda", arch="sm_90", **_config(dtype, acc)).ptx
        assert "mma.sync.aligned" in ptx, dtype
        if dtype in ("float16", "bfloat16"):
            assert "ldmatrix.sync.aligned" in ptx, dtype


@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (True, False), (False, True),
                                             (True, True)])
@pytest.mark.parametrize("bm,bn,bk,threads", [(128, 128, 32, 128), (256, 128, 64, 256),
                                              (64, 64, 16, 128), (128, 64, 64, 128)])
def test_ldmatrix_addresses_come_from_one_base_per_operand(monkeypatch, trans_A, trans_B, bm,
                                                           bn, bk, threads):
    """For the swizzled operand tiles the compiler picks, every ldmatrix address of a
    T.gemm is one per-thread base moved by an XOR (or add) per column step and a
    constant per row step, checked at compile time for every lane of every warp
    (lowering/ldmatrix.py); the GPU tests above check the results."""
    from tilejit.codegen.lowering import ldmatrix
    plans = []
    original = ldmatrix._plan

    def recording(*args):
        plans.append((args[2], original(*args)))
        return plans[-1][1]
    monkeypatch.setattr(ldmatrix, "_plan", recording)
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    a, b, A, B = _inputs(512, 512, 512, "float16", trans_A, trans_B)
    c = torch.zeros(512, 512, dtype=torch.float32)
    tilejit.kernel(gemm.func).compile(A, B, c, target="cuda", arch="sm_90", block_M=bm,
                                      block_N=bn, block_K=bk, threads=threads,
                                      trans_A=trans_A, trans_B=trans_B)
    assert sorted(op for op, _ in plans) == ["A", "B"]
    assert all(p is not None for _, p in plans), plans


def test_gemm_shape_mismatch_is_a_compile_error():
    @tilejit.kernel
    def bad(A, B, C):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), A.dtype)
            B_s = T.alloc_shared((16, 64), B.dtype)
            C_f = T.alloc_fragment((64, 64), T.float32)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])
    a = np.zeros((64, 32), np.float16)
    with pytest.raises(tilejit.CompileError, match="shapes do not match"):
        bad.compile(a, np.zeros((16, 64), np.float16), np.zeros((64, 64), np.float32),
                    target="cuda", arch="sm_90")


def test_pipelined_gemm_ptx_uses_cp_async_with_the_stage_count():
    a = torch.zeros(512, 512, dtype=torch.float16)
    c = torch.zeros(512, 512, dtype=torch.float32)
    for stages in (2, 3, 4):
        ptx = gemm.compile(a, a, c, target="cuda", arch="sm_80", stages=stages).ptx
        assert "cp.async.cg.shared.global" in ptx
        assert f"cp.async.wait_group \t{stages - 2};" in ptx or \
            f"cp.async.wait_group {stages - 2};" in ptx
        assert "ldmatrix.sync.aligned" in ptx and "mma.sync.aligned" in ptx
    ptx = gemm.compile(a, a, c, target="cuda", arch="sm_80", stages=1).ptx
    assert "cp.async" not in ptx


def test_half_precision_c_is_stored_in_pairs():
    """An fp16 C goes out as 4-byte pairs (each thread holds two adjacent columns of
    every mma tile): 64 stores per thread of a 128x128 tile with 128 threads instead of
    128 two-byte ones (H200: 4096^3 fp16 0.48 -> 0.54 of cuBLAS). Rows that are not
    16-byte aligned (an odd N) keep two-byte stores."""
    a = torch.zeros(512, 512, dtype=torch.float16)
    # (sm_90, mma.sync: on sm_90a the wgmma accumulator goes out through shared memory)
    ptx = gemm.compile(a, a, torch.zeros(512, 512, dtype=torch.float16),
                       target="cuda", arch="sm_90").ptx
    # 64 in the interior path (unchecked) and 64 in the edge path (checked per pair); a
    # pair converted by one cvt.rn.f16x2.f32 is one b32 register, stored as such
    assert ptx.count("st.global.v2.b16") + ptx.count("st.global.b32") == 128
    assert ptx.count("cvt.rn.f16x2.f32") >= 64         # the interior path's, at least
    odd = torch.zeros(512, 511, dtype=torch.float16)
    ptx = gemm.compile(a, odd, torch.zeros(512, 511, dtype=torch.float16),
                       target="cuda", arch="sm_90").ptx
    assert "st.global.v2.b16" not in ptx and "st.global.b16" in ptx


def test_pipelined_shared_memory_holds_every_stage():
    a = torch.zeros(512, 512, dtype=torch.float16)
    c = torch.zeros(512, 512, dtype=torch.float32)
    one = gemm.compile(a, a, c, target="cuda", arch="sm_80", stages=1).shared_bytes
    three = gemm.compile(a, a, c, target="cuda", arch="sm_80", stages=3).shared_bytes
    assert one == 2 * 128 * 32 * 2 and three == 3 * one
    # on sm_90 (TMA) an mbarrier of 8 bytes per stage follows
    tma = gemm.compile(a, a, c, target="cuda", arch="sm_90", stages=3).shared_bytes
    assert tma == three + 3 * 8


def test_use_swizzle_remaps_block_indices_in_ptx():
    a = torch.zeros(512, 512, dtype=torch.float16)
    c = torch.zeros(512, 512, dtype=torch.float32)
    on = gemm.compile(a, a, c, target="cuda", arch="sm_90", panel=4).ptx
    off = gemm.compile(a, a, c, target="cuda", arch="sm_90", panel=0).ptx
    assert "%nctaid.x" in on and "%nctaid.x" not in off


@tilejit.kernel
def gemm_scheduled(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                   block_K: T.constexpr = 32):
    """An explicit schedule: the two copies in stage 0, the gemm in stage 1."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3, order=[0, 1, 2],
                             stage=[0, 0, 1]):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


def test_explicit_pipeline_schedule():
    a, b, A, B = _inputs(130, 70, 200, "float16", False, False)
    c = torch.zeros(130, 70)
    gemm_scheduled(A, B, c)
    _check(c, a, b, "float16", "float32", 200)
    ptx = gemm_scheduled.compile(A, B, c, target="cuda", arch="sm_80").ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group \t1;" in ptx


@tilejit.kernel
def gemm_grouped_schedule(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                          block_K: T.constexpr = 32):
    """TileLang's wgmma FlashAttention writes order=/stage= per group of its lowered
    statements, `group=[[...], ...]`: a hint, the copies found as without it."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3, order=[-1, 0, 1],
                             stage=[-1, 0, 1], group=[[0], [1], [2]]):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


def test_a_grouped_schedule_is_a_hint():
    a, b, A, B = _inputs(130, 70, 200, "float16", False, False)
    c = torch.zeros(130, 70)
    gemm_grouped_schedule(A, B, c)
    _check(c, a, b, "float16", "float32", 200)
    grouped = gemm_grouped_schedule.compile(A, B, c, target="cuda", arch="sm_80").ptx
    scheduled = gemm_scheduled.compile(A, B, c, target="cuda", arch="sm_80").ptx
    assert "cp.async.cg.shared.global" in grouped and "cp.async.wait_group \t1;" in grouped
    assert grouped.count("cp.async.cg") == scheduled.count("cp.async.cg")


def test_a_schedule_that_runs_compute_ahead_is_an_error():
    @tilejit.kernel
    def bad(A, B, C):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), A.dtype)
            B_s = T.alloc_shared((32, 64), B.dtype)
            C_f = T.alloc_fragment((64, 64), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2, stage=[0, 1, 0]):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])
    a = np.zeros((64, 128), np.float16)
    with pytest.raises(tilejit.CompileError, match="only a global→shared T.copy can run ahead"):
        bad.compile(a, np.zeros((128, 64), np.float16), np.zeros((64, 64), np.float32),
                    target="cuda", arch="sm_80")


def test_a_pipelined_tile_used_after_its_loop_is_an_error():
    @tilejit.kernel
    def bad(A, B, C):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), A.dtype)
            B_s = T.alloc_shared((32, 64), B.dtype)
            C_f = T.alloc_fragment((64, 64), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(A_s, C[0, 0])
    a = np.zeros((64, 128), np.float16)
    with pytest.raises(tilejit.CompileError, match="keeps several versions"):
        bad.compile(a, np.zeros((128, 64), np.float16), np.zeros((64, 64), np.float32),
                    target="cuda", arch="sm_80")

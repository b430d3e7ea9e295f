"""``run.py gemm_sp``: T.gemm_sp (A 2:4 sparse, compressed as ``tilejit.utils.sparse``
compresses it) beside torch.matmul on the dense A and tilejit's dense GEMM on the same
block shapes, fp16 (fp32 accumulate) at 4096^3 and 8192^3. TFLOP/s count the dense
product's 2·M·N·K. On sm_90a T.gemm_sp runs on the sparse tensor cores
(``wgmma.mma_async.sp``, ``passes/sparse_gemms.py``); elsewhere it expands A in shared
memory and runs the dense gemm."""
from __future__ import annotations

import torch

import tilejit
import tilejit.language as T
from tilejit.utils.sparse import compress

CONFIGS = [dict(block_M=128, block_N=128, block_K=64, threads=128, num_stages=2),
           dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3),
           # TileLang's example_gemm_sp.py defaults: E's rows 16 bytes, TMA's narrowest
           dict(block_M=128, block_N=256, block_K=128, threads=256, num_stages=2)]


@tilejit.kernel
def gemm_sp_kernel(A_sparse, E, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
                   block_K: T.constexpr = 64, threads: T.constexpr = 128,
                   num_stages: T.constexpr = 2):
    M = A_sparse.shape[0]
    K, N = B.shape
    e_factor = K // E.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        T.use_swizzle(panel_size=8)
        A_s = T.alloc_shared((block_M, block_K // 2), A_sparse.dtype)
        E_s = T.alloc_shared((block_M, block_K // e_factor), E.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A_sparse[by * block_M, k * block_K // 2], A_s)
            T.copy(E[by * block_M, k * block_K // e_factor], E_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm_sp(A_s, E_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


def bench_gemm_sp(checked_and_timed, dense_gemm, sizes=(4096, 8192)):
    """``checked_and_timed`` and ``dense_gemm``: run.py's timing helper and its GEMM."""
    return [row for n in sizes for row in _bench_one(checked_and_timed, dense_gemm, n)]


def _bench_one(checked_and_timed, dense_gemm, n):
    g = torch.Generator(device="cuda").manual_seed(0)
    dense = torch.randn(n, n, device="cuda", generator=g)
    drop = torch.rand(n, n // 4, 4, device="cuda", generator=g).argsort(-1)[..., :2]
    a = dense.view(n, n // 4, 4).scatter(-1, drop, 0.0).view(n, n).half()
    b = torch.randn(n, n, device="cuda", generator=g).half()
    values, meta = compress(a)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    variants = [(f"torch.matmul dense A float16 {n}^3", lambda: torch.matmul(a, b, out=c))]
    for cfg in CONFIGS:
        label = (f"{cfg['block_M']}x{cfg['block_N']}x{cfg['block_K']} t{cfg['threads']} "
                 f"s{cfg['num_stages']} float16 {n}^3")
        variants.append((f"tilejit T.gemm_sp {label}",
                         lambda cfg=cfg: gemm_sp_kernel(values, meta, b, c, **cfg)))
        variants.append((f"tilejit dense T.gemm {label}",
                         lambda cfg=cfg: dense_gemm(a, b, c, **cfg)))
    return checked_and_timed(variants, c, a @ b, 2 * n ** 3)

"""Kernels and inputs that tests in more than one folder use (a test file never imports
another test file)."""
import torch

import tilejit
import tilejit.language as T

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "int8": torch.int8, "int32": torch.int32}


@tilejit.kernel
def gemm(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
         block_K: T.constexpr = 32, trans_A: T.constexpr = False, trans_B: T.constexpr = False,
         policy: T.constexpr = "Square", threads: T.constexpr = 128,
         acc: T.constexpr = "float32", stages: T.constexpr = 2, panel: T.constexpr = 3):
    M = A.shape[1] if trans_A else A.shape[0]
    K = A.shape[0] if trans_A else A.shape[1]
    N = B.shape[0] if trans_B else B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        T.use_swizzle(panel_size=panel, enable=panel > 0)
        A_s = T.alloc_shared((block_K, block_M) if trans_A else (block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_N, block_K) if trans_B else (block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), acc)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            if trans_A:
                T.copy(A[k * block_K, by * block_M], A_s)
            else:
                T.copy(A[by * block_M, k * block_K], A_s)
            if trans_B:
                T.copy(B[bx * block_N, k * block_K], B_s)
            else:
                T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B, policy=policy)
        T.copy(C_f, C[by * block_M, bx * block_N])



@tilejit.kernel
def staged_epilogue(A, B, C, F, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                    block_K: T.constexpr = 32, row0: T.constexpr = 16, col0: T.constexpr = 32):
    """A GEMM whose accumulator goes out through a region of a bigger shared tile that
    starts at (row0, col0), and comes back from it into a fragment of C's dtype written
    to F: a fragment's runs to and from a shared region, and the region's synchronous
    copy to global memory, by the per-run and per-chunk paths (a region's starts are
    run-time values in the IR; whole tiles take lowering/slot_offsets.py's plans)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        acc = T.alloc_fragment((block_M, block_N), "float32")
        back = T.alloc_fragment((block_M, block_N), C.dtype)
        S = T.alloc_shared((block_M + 32, block_N + 64), C.dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, S[row0:row0 + block_M, col0:col0 + block_N])
        T.copy(S[row0:row0 + block_M, col0:col0 + block_N], C[by * block_M, bx * block_N])
        T.copy(S[row0:row0 + block_M, col0:col0 + block_N], back)
        T.copy(back, F[by * block_M, bx * block_N])


def gemm_inputs(M, N, K, dtype, trans_A, trans_B, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-8, 8, (K, N), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(TORCH[dtype])
        b = torch.randn(K, N, generator=g).to(TORCH[dtype])
    A = a.t().contiguous() if trans_A else a
    B = b.t().contiguous() if trans_B else b
    return a, b, A.to(device), B.to(device)


@tilejit.kernel
def shifted_copy(A, Out, bm: T.constexpr = 64, bn: T.constexpr = 64, shift: T.constexpr = 32):
    """Out's tile (bx, k) is A's tile moved up and left by ``shift``: the first row and
    column of tiles read before the tensor's start (zeros), the last past its end."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        S = T.alloc_shared((bm, bn), A.dtype)
        for k in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
            T.copy(A[bx * bm - shift, k * bn - shift], S)
            T.copy(S, Out[bx * bm, k * bn])

"""Seed 000 (动态形状与变长序列: T.dynamic 的机制), matmul_dynamic_mnk: the program as the seed writes it (the section gives no imports; the tutorial's own are used), imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def matmul_dynamic_mnk(
    A, B, block_M, block_N, block_K, trans_A, trans_B,
    in_dtype, out_dtype, accum_dtype, num_stages, threads,
):
    M = T.dynamic("m")
    N = T.dynamic("n")
    K = T.dynamic("k")

    A: T.Tensor((M, K), in_dtype)
    B: T.Tensor((K, N), in_dtype)
    C = T.empty((M, N), out_dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), in_dtype)
        B_shared = T.alloc_shared((block_K, block_N), in_dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])

    return C

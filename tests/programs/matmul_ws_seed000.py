"""Seed 000 (Warp specialization), the T.ws GEMM: the seed's listing as the body of an
eager-style program (the listing shows no function around it: the signature and the
symbols are matmul_seed000's), imports changed to tilejit. As written it never clears
C_local before the first T.gemm accumulates into it (the simulator says so:
UninitializedReadError naming C_local and the line); ``matmul_ws_seed000_cleared.py`` is
the same program with the ``T.clear(C_local)`` added."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def matmul_ws(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    num_stages = 2
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
        B_shared = T.alloc_shared((num_stages, block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        mbars = T.alloc_barrier([128, 128] * num_stages)

        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            with T.ws(1):   # loader warps
                T.mbarrier_wait_parity(mbarrier=mbars[ko % num_stages + num_stages],
                                       parity=((ko // num_stages) % num_stages) ^ 1)
                T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                           A_shared[ko % num_stages, :, :], barrier=mbars[ko % num_stages])
                T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                           B_shared[ko % num_stages, :, :], barrier=mbars[ko % num_stages])
                T.mbarrier_arrive(mbarrier=mbars[ko % num_stages])
            with T.ws(0):   # compute warps
                T.mbarrier_wait_parity(mbarrier=mbars[ko % num_stages],
                                       parity=(ko // num_stages) % num_stages)
                T.gemm(A_shared[ko % num_stages, :, :], B_shared[ko % num_stages, :, :], C_local)
                T.mbarrier_arrive(mbarrier=mbars[ko % num_stages + num_stages])

        with T.ws(0):
            T.copy(C_local, C[by * block_M, bx * block_N])

    return C

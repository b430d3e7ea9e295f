"""Seed 000 (Persistent kernel), the persistent GEMM in the eager style: the seed's
listing, contiguous, in the body of an eager program (the signature and symbols are
matmul_seed000's), imports changed to tilejit. ``driver.get_num_sms()`` in the body is
asked on the host before each compilation (frontend/host_queries.py): a compile-time
value of the specialization, as TileLang evaluates it when it traces the program."""
import tilejit as tilelang
import tilejit.language as T
from tilejit.carver.arch import driver


@tilelang.jit
def matmul_persistent(A, B, block_M, block_N, block_K, threads, num_stages,
                      dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    sm_num = driver.get_num_sms()
    m_blocks = T.ceildiv(M, block_M)
    n_blocks = T.ceildiv(N, block_N)

    with T.Kernel(sm_num, threads=threads) as (block_id):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        C_shared = T.alloc_shared((block_M, block_N), dtype)

        for bx, by in T.Persistent([m_blocks, n_blocks], sm_num, block_id):
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, by * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[bx * block_M, by * block_N])

    return C

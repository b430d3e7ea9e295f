"""Seed 000 (Persistent kernel), the persistent GEMM: the seed's listing as the body of
a TileLang factory (the listing shows no function around it; TileLang's own persistent
GEMM example is such a factory, ``@tilelang.jit(out_idx=[-1])``), imports changed to
tilejit. ``sm_num`` is read once, when the factory runs: the SMs of the GPU, or 132 in
the simulator (``driver.SIMULATED_NUM_SMS``)."""
import tilejit as tilelang
import tilejit.language as T
from tilejit.carver.arch import driver


@tilelang.jit(out_idx=[-1])
def matmul_persistent(M, N, K, block_M, block_N, block_K, threads, num_stages,
                      dtype=T.float16, accum_dtype=T.float32):
    sm_num = driver.get_num_sms()
    m_blocks = T.ceildiv(M, block_M)
    n_blocks = T.ceildiv(N, block_N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
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

    return main

"""Seed 002 (零基础教程, 八、示例四：GEMM), tilelang_matmul: the program as the seed writes it, imports changed to tilejit; its test_gemm is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_matmul(
    A,
    B,
    block_m: int,
    block_n: int,
    block_k: int,
):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)

    C = T.empty((M, N), T.float16)

    with T.Kernel(
        T.ceildiv(N, block_n),
        T.ceildiv(M, block_m),
        threads=128,
    ) as (bx, by):
        A_shared = T.alloc_shared(
            (block_m, block_k),
            T.float16,
        )
        B_shared = T.alloc_shared(
            (block_k, block_n),
            T.float16,
        )
        C_local = T.alloc_fragment(
            (block_m, block_n),
            T.float32,
        )

        T.clear(C_local)

        for ko in T.Pipelined(
            T.ceildiv(K, block_k),
            num_stages=3,
        ):
            T.copy(
                A[
                    by * block_m,
                    ko * block_k,
                ],
                A_shared,
            )

            T.copy(
                B[
                    ko * block_k,
                    bx * block_n,
                ],
                B_shared,
            )

            T.gemm(
                A_shared,
                B_shared,
                C_local,
            )

        T.copy(
            C_local,
            C[
                by * block_m,
                bx * block_n,
            ],
        )

    return C

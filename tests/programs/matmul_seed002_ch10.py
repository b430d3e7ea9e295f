"""Seed 002 (第十章 GEMM, 10.4 TileLang), tilelang_matmul: the program as the seed writes it, imports changed to tilejit; the 10.5 calling code (1024^3 on cuda) is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_matmul(
    A,
    B,
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 32,
):
    M, N, K = T.const("M, N, K")

    input_dtype = T.float16
    accumulation_dtype = T.float32

    A: T.Tensor(
        (M, K),
        input_dtype,
    )
    B: T.Tensor(
        (K, N),
        input_dtype,
    )

    C = T.empty(
        (M, N),
        input_dtype,
    )

    with T.Kernel(
        T.ceildiv(N, block_n),
        T.ceildiv(M, block_m),
        threads=128,
    ) as (block_x, block_y):
        a_shared = T.alloc_shared(
            (block_m, block_k),
            input_dtype,
        )
        b_shared = T.alloc_shared(
            (block_k, block_n),
            input_dtype,
        )
        c_fragment = T.alloc_fragment(
            (block_m, block_n),
            accumulation_dtype,
        )

        T.clear(c_fragment)

        for reduction_block in T.Pipelined(
            T.ceildiv(K, block_k),
            num_stages=3,
        ):
            T.copy(
                A[
                    block_y * block_m,
                    reduction_block * block_k,
                ],
                a_shared,
            )

            T.copy(
                B[
                    reduction_block * block_k,
                    block_x * block_n,
                ],
                b_shared,
            )

            T.gemm(
                a_shared,
                b_shared,
                c_fragment,
            )

        T.copy(
            c_fragment,
            C[
                block_y * block_m,
                block_x * block_n,
            ],
        )

    return C

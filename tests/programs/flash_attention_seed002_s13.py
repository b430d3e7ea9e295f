"""Seed 002 (零基础教程, 十三、TileLang FlashAttention 教学版结构), the eager-style skeleton tilelang_flash_attention: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_flash_attention(
    Q,
    K,
    V,
    block_m: int,
    block_n: int,
    block_d: int,
):
    B, H, SQ, SK, D = T.const(
        "B, H, SQ, SK, D"
    )

    Q: T.Tensor((B, H, SQ, D), T.float16)
    K: T.Tensor((B, H, SK, D), T.float16)
    V: T.Tensor((B, H, SK, D), T.float16)

    O = T.empty(
        (B, H, SQ, D),
        T.float16,
    )

    scale = 1.0 / T.sqrt(D)

    with T.Kernel(
        T.ceildiv(SQ, block_m),
        H,
        B,
        threads=256,
    ) as (q_block, head, batch):
        q_shared = T.alloc_shared(
            (block_m, block_d),
            T.float16,
        )
        k_shared = T.alloc_shared(
            (block_n, block_d),
            T.float16,
        )
        v_shared = T.alloc_shared(
            (block_n, block_d),
            T.float16,
        )

        scores = T.alloc_fragment(
            (block_m, block_n),
            T.float32,
        )
        output_acc = T.alloc_fragment(
            (block_m, block_d),
            T.float32,
        )

        row_max = T.alloc_fragment(
            (block_m,),
            T.float32,
        )
        row_max_old = T.alloc_fragment(
            (block_m,),
            T.float32,
        )
        row_sum = T.alloc_fragment(
            (block_m,),
            T.float32,
        )
        row_sum_block = T.alloc_fragment(
            (block_m,),
            T.float32,
        )
        correction = T.alloc_fragment(
            (block_m,),
            T.float32,
        )

        T.copy(
            Q[
                batch,
                head,
                q_block * block_m,
                0,
            ],
            q_shared,
        )

        T.clear(output_acc)
        T.fill(row_max, -T.infinity(T.float32))
        T.clear(row_sum)

        for kv_block in T.Pipelined(
            T.ceildiv(SK, block_n),
            num_stages=2,
        ):
            T.copy(row_max, row_max_old)

            T.copy(
                K[
                    batch,
                    head,
                    kv_block * block_n,
                    0,
                ],
                k_shared,
            )
            T.copy(
                V[
                    batch,
                    head,
                    kv_block * block_n,
                    0,
                ],
                v_shared,
            )

            T.clear(scores)

            T.gemm(
                q_shared,
                k_shared,
                scores,
                transpose_B=True,
            )

            for i, j in T.Parallel(
                block_m,
                block_n,
            ):
                scores[i, j] = scores[i, j] * scale

            T.fill(
                row_max,
                -T.infinity(T.float32),
            )

            T.reduce_max(
                scores,
                row_max,
                dim=1,
                clear=False,
            )

            for i in T.Parallel(block_m):
                row_max[i] = T.max(
                    row_max[i],
                    row_max_old[i],
                )

                correction[i] = T.exp(
                    row_max_old[i] - row_max[i]
                )

            for i, j in T.Parallel(
                block_m,
                block_n,
            ):
                scores[i, j] = T.exp(
                    scores[i, j] - row_max[i]
                )

            T.reduce_sum(
                scores,
                row_sum_block,
                dim=1,
            )

            for i in T.Parallel(block_m):
                row_sum[i] = (
                    row_sum[i] * correction[i]
                    + row_sum_block[i]
                )

            for i, j in T.Parallel(
                block_m,
                block_d,
            ):
                output_acc[i, j] = (
                    output_acc[i, j]
                    * correction[i]
                )

            T.gemm(
                scores,
                v_shared,
                output_acc,
            )

        for i, j in T.Parallel(
            block_m,
            block_d,
        ):
            output_acc[i, j] = (
                output_acc[i, j]
                / row_sum[i]
            )

        T.copy(
            output_acc,
            O[
                batch,
                head,
                q_block * block_m,
                0,
            ],
        )

    return O

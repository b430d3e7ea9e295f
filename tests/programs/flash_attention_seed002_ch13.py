"""Seed 002 (第十三章 FlashAttention, 13.8 教学实现), classic-style tilelang_flash_attention with out_idx and pass_configs: the program as the seed writes it, imports changed to tilejit; the 13.9 calling code is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(
    out_idx=[3],
    pass_configs={
        tilelang.PassConfigKey
        .TL_ENABLE_FAST_MATH: True,
    },
)
def tilelang_flash_attention(
    batch: int,
    heads: int,
    sequence: int,
    dimension: int,
    block_m: int = 64,
    block_n: int = 64,
    num_stages: int = 2,
    threads: int = 128,
):
    input_dtype = T.float16
    accumulation_dtype = T.float32

    qkv_shape = (
        batch,
        heads,
        sequence,
        dimension,
    )

    softmax_scale = (
        (1.0 / dimension) ** 0.5
        * 1.4426950408889634
    )

    @T.prim_func
    def kernel(
        Q: T.Tensor(
            qkv_shape,
            input_dtype,
        ),
        K: T.Tensor(
            qkv_shape,
            input_dtype,
        ),
        V: T.Tensor(
            qkv_shape,
            input_dtype,
        ),
        O: T.Tensor(
            qkv_shape,
            input_dtype,
        ),
    ):
        with T.Kernel(
            T.ceildiv(
                sequence,
                block_m,
            ),
            heads,
            batch,
            threads=threads,
        ) as (
            query_block,
            head,
            batch_id,
        ):
            q_shared = T.alloc_shared(
                (
                    block_m,
                    dimension,
                ),
                input_dtype,
            )
            k_shared = T.alloc_shared(
                (
                    block_n,
                    dimension,
                ),
                input_dtype,
            )
            v_shared = T.alloc_shared(
                (
                    block_n,
                    dimension,
                ),
                input_dtype,
            )
            o_shared = T.alloc_shared(
                (
                    block_m,
                    dimension,
                ),
                input_dtype,
            )

            scores = T.alloc_fragment(
                (
                    block_m,
                    block_n,
                ),
                accumulation_dtype,
            )
            probabilities = (
                T.alloc_fragment(
                    (
                        block_m,
                        block_n,
                    ),
                    input_dtype,
                )
            )
            output = T.alloc_fragment(
                (
                    block_m,
                    dimension,
                ),
                accumulation_dtype,
            )

            running_max = (
                T.alloc_fragment(
                    (block_m,),
                    accumulation_dtype,
                )
            )
            previous_max = (
                T.alloc_fragment(
                    (block_m,),
                    accumulation_dtype,
                )
            )
            rescale = T.alloc_fragment(
                (block_m,),
                accumulation_dtype,
            )
            tile_sum = T.alloc_fragment(
                (block_m,),
                accumulation_dtype,
            )
            running_sum = (
                T.alloc_fragment(
                    (block_m,),
                    accumulation_dtype,
                )
            )

            T.copy(
                Q[
                    batch_id,
                    head,
                    query_block
                    * block_m,
                    0,
                ],
                q_shared,
            )

            T.fill(
                output,
                0,
            )
            T.fill(
                running_sum,
                0,
            )
            T.fill(
                running_max,
                -T.infinity(
                    accumulation_dtype
                ),
            )

            for key_block in T.Pipelined(
                T.ceildiv(
                    sequence,
                    block_n,
                ),
                num_stages=num_stages,
            ):
                T.copy(
                    K[
                        batch_id,
                        head,
                        key_block
                        * block_n,
                        0,
                    ],
                    k_shared,
                )

                T.clear(scores)

                T.gemm(
                    q_shared,
                    k_shared,
                    scores,
                    transpose_B=True,
                    policy=(
                        T.GemmWarpPolicy
                        .FullRow
                    ),
                )

                T.copy(
                    running_max,
                    previous_max,
                )

                T.fill(
                    running_max,
                    -T.infinity(
                        accumulation_dtype
                    ),
                )

                T.reduce_max(
                    scores,
                    running_max,
                    dim=1,
                    clear=False,
                )

                for i in T.Parallel(
                    block_m
                ):
                    running_max[i] = T.max(
                        running_max[i],
                        previous_max[i],
                    )

                    rescale[i] = T.exp2(
                        previous_max[i]
                        * softmax_scale
                        - running_max[i]
                        * softmax_scale
                    )

                for i, j in T.Parallel(
                    block_m,
                    dimension,
                ):
                    output[i, j] *= (
                        rescale[i]
                    )

                for i, j in T.Parallel(
                    block_m,
                    block_n,
                ):
                    scores[i, j] = T.exp2(
                        scores[i, j]
                        * softmax_scale
                        - running_max[i]
                        * softmax_scale
                    )

                T.reduce_sum(
                    scores,
                    tile_sum,
                    dim=1,
                    clear=True,
                )

                for i in T.Parallel(
                    block_m
                ):
                    running_sum[i] = (
                        running_sum[i]
                        * rescale[i]
                        + tile_sum[i]
                    )

                T.copy(
                    scores,
                    probabilities,
                )

                T.copy(
                    V[
                        batch_id,
                        head,
                        key_block
                        * block_n,
                        0,
                    ],
                    v_shared,
                )

                T.gemm(
                    probabilities,
                    v_shared,
                    output,
                    policy=(
                        T.GemmWarpPolicy
                        .FullRow
                    ),
                )

            for i, j in T.Parallel(
                block_m,
                dimension,
            ):
                output[i, j] /= (
                    running_sum[i]
                )

            T.copy(
                output,
                o_shared,
            )

            T.copy(
                o_shared,
                O[
                    batch_id,
                    head,
                    query_block
                    * block_m,
                    0,
                ],
            )

    return kernel

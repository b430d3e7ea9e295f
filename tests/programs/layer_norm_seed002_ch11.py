"""Seed 002 (第十一章 LayerNorm, 11.4 TileLang), tilelang_layer_norm: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_layer_norm(
    X,
    Gamma,
    Beta,
    eps: float = 1e-5,
    block_m: int = 1,
):
    M, N = T.const("M, N")

    input_dtype = T.float16
    accumulation_dtype = T.float32

    X: T.Tensor(
        (M, N),
        input_dtype,
    )
    Gamma: T.Tensor(
        (N,),
        input_dtype,
    )
    Beta: T.Tensor(
        (N,),
        input_dtype,
    )

    Y = T.empty(
        (M, N),
        input_dtype,
    )

    with T.Kernel(
        T.ceildiv(M, block_m),
        threads=256,
    ) as block:
        x_shared = T.alloc_shared(
            (block_m, N),
            input_dtype,
        )
        gamma_shared = T.alloc_shared(
            (N,),
            input_dtype,
        )
        beta_shared = T.alloc_shared(
            (N,),
            input_dtype,
        )

        x = T.alloc_fragment(
            (block_m, N),
            accumulation_dtype,
        )
        x_squared = T.alloc_fragment(
            (block_m, N),
            accumulation_dtype,
        )

        row_sum = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )
        row_square_sum = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )
        row_mean = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )
        row_inverse_std = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )

        T.copy(
            X[
                block * block_m,
                0,
            ],
            x_shared,
        )

        T.copy(
            Gamma,
            gamma_shared,
        )

        T.copy(
            Beta,
            beta_shared,
        )

        for i, j in T.Parallel(
            block_m,
            N,
        ):
            value = T.Cast(
                accumulation_dtype,
                x_shared[i, j],
            )

            x[i, j] = value
            x_squared[i, j] = (
                value * value
            )

        T.reduce_sum(
            x,
            row_sum,
            dim=1,
            clear=True,
        )

        T.reduce_sum(
            x_squared,
            row_square_sum,
            dim=1,
            clear=True,
        )

        inverse_width = (
            T.float32(1.0)
            / T.Cast(
                accumulation_dtype,
                N,
            )
        )

        for i in T.Parallel(block_m):
            mean = (
                row_sum[i]
                * inverse_width
            )

            variance = (
                row_square_sum[i]
                * inverse_width
                - mean * mean
            )

            row_mean[i] = mean

            row_inverse_std[i] = T.rsqrt(
                variance + eps
            )

        for i, j in T.Parallel(
            block_m,
            N,
        ):
            normalized = (
                x[i, j]
                - row_mean[i]
            ) * row_inverse_std[i]

            result = (
                normalized
                * T.Cast(
                    accumulation_dtype,
                    gamma_shared[j],
                )
                + T.Cast(
                    accumulation_dtype,
                    beta_shared[j],
                )
            )

            x_shared[i, j] = T.Cast(
                input_dtype,
                result,
            )

        T.copy(
            x_shared,
            Y[
                block * block_m,
                0,
            ],
        )

    return Y

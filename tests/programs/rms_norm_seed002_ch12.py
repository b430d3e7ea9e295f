"""Seed 002 (第十二章 RMSNorm, 12.4 TileLang), tilelang_rms_norm: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_rms_norm(
    X,
    Weight,
    eps: float = 1e-6,
    block_m: int = 1,
):
    M, N = T.const("M, N")

    input_dtype = T.float16
    accumulation_dtype = T.float32

    X: T.Tensor(
        (M, N),
        input_dtype,
    )

    Weight: T.Tensor(
        (N,),
        input_dtype,
    )

    Y = T.empty(
        (M, N),
        input_dtype,
    )

    with T.Kernel(
        T.ceildiv(M, block_m),
        threads=128,
    ) as block:
        values = T.alloc_fragment(
            (block_m, N),
            accumulation_dtype,
        )
        squares = T.alloc_fragment(
            (block_m, N),
            accumulation_dtype,
        )
        square_sum = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )
        inverse_rms = T.alloc_fragment(
            (block_m,),
            accumulation_dtype,
        )
        output = T.alloc_fragment(
            (block_m, N),
            input_dtype,
        )

        T.copy(
            X[
                block * block_m,
                0,
            ],
            values,
        )

        for i, j in T.Parallel(
            block_m,
            N,
        ):
            squares[i, j] = (
                values[i, j]
                * values[i, j]
            )

        T.reduce_sum(
            squares,
            square_sum,
            dim=1,
            clear=True,
        )

        for i in T.Parallel(block_m):
            inverse_rms[i] = T.rsqrt(
                square_sum[i] / N
                + eps
            )

        for i, j in T.Parallel(
            block_m,
            N,
        ):
            output[i, j] = T.Cast(
                input_dtype,
                values[i, j]
                * inverse_rms[i]
                * T.Cast(
                    accumulation_dtype,
                    Weight[j],
                ),
            )

        T.copy(
            output,
            Y[
                block * block_m,
                0,
            ],
        )

    return Y

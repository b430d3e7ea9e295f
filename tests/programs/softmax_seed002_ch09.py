"""Seed 002 (第九章 Softmax, 9.4 TileLang 教学版), tilelang_softmax: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_softmax(X):
    M, N = T.const("M, N")

    input_dtype = T.float16
    accumulation_dtype = T.float32

    X: T.Tensor((M, N), input_dtype)
    Y = T.empty((M, N), input_dtype)

    with T.Kernel(
        M,
        threads=128,
    ) as row:
        x = T.alloc_fragment(
            (1, N),
            input_dtype,
        )
        exponentials = T.alloc_fragment(
            (1, N),
            accumulation_dtype,
        )
        output = T.alloc_fragment(
            (1, N),
            input_dtype,
        )

        row_max = T.alloc_fragment(
            (1,),
            input_dtype,
        )
        row_sum = T.alloc_fragment(
            (1,),
            accumulation_dtype,
        )

        T.copy(
            X[row, 0],
            x,
        )

        T.reduce_max(
            x,
            row_max,
            dim=1,
            clear=True,
        )

        for _, column in T.Parallel(1, N):
            value = T.Cast(
                accumulation_dtype,
                x[0, column],
            )
            maximum = T.Cast(
                accumulation_dtype,
                row_max[0],
            )

            exponentials[0, column] = T.exp(
                value - maximum
            )

        T.reduce_sum(
            exponentials,
            row_sum,
            dim=1,
            clear=True,
        )

        for _, column in T.Parallel(1, N):
            output[0, column] = T.Cast(
                input_dtype,
                exponentials[0, column]
                / row_sum[0],
            )

        T.copy(
            output,
            Y[row, 0],
        )

    return Y

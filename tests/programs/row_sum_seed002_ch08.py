"""Seed 002 (第八章 Reduce, 8.4 TileLang), tilelang_row_sum: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_row_sum(X):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M,), T.float32)

    with T.Kernel(
        M,
        threads=128,
    ) as row:
        values = T.alloc_fragment(
            (1, N),
            T.float32,
        )
        total = T.alloc_fragment(
            (1,),
            T.float32,
        )

        T.copy(
            X[row, 0],
            values,
        )

        T.reduce_sum(
            values,
            total,
            dim=1,
            clear=True,
        )

        Y[row] = total[0]

    return Y

"""Seed 002 (零基础教程, 九、7. TileLang LayerNorm), tilelang_layer_norm: the program as the seed writes it (the section continues the RMSNorm one and repeats no imports; its imports are used), imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_layer_norm(
    X,
    Weight,
    Bias,
    block_rows: int,
    eps: float,
):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), T.float32)
    Weight: T.Tensor((N,), T.float32)
    Bias: T.Tensor((N,), T.float32)

    Y = T.empty((M, N), T.float32)

    with T.Kernel(
        T.ceildiv(M, block_rows),
        threads=128,
    ) as bx:
        x_local = T.alloc_fragment(
            (block_rows, N),
            T.float32,
        )
        centered_square = T.alloc_fragment(
            (block_rows, N),
            T.float32,
        )
        mean = T.alloc_fragment(
            (block_rows,),
            T.float32,
        )
        variance = T.alloc_fragment(
            (block_rows,),
            T.float32,
        )

        T.copy(
            X[bx * block_rows : (bx + 1) * block_rows, :],
            x_local,
        )

        T.reduce_sum(
            x_local,
            mean,
            dim=1,
        )

        for i in T.Parallel(block_rows):
            mean[i] = mean[i] / N

        for i, j in T.Parallel(block_rows, N):
            centered = x_local[i, j] - mean[i]
            centered_square[i, j] = centered * centered

        T.reduce_sum(
            centered_square,
            variance,
            dim=1,
        )

        for i in T.Parallel(block_rows):
            variance[i] = T.rsqrt(
                variance[i] / N + eps
            )

        for i, j in T.Parallel(block_rows, N):
            normalized = (
                x_local[i, j] - mean[i]
            ) * variance[i]

            x_local[i, j] = (
                normalized * Weight[j] + Bias[j]
            )

        T.copy(
            x_local,
            Y[bx * block_rows : (bx + 1) * block_rows, :],
        )

    return Y

"""Seed 002 (零基础教程, 九、6. TileLang RMSNorm), tilelang_rms_norm: the program as the seed writes it, imports changed to tilejit; its test_rms_norm is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_rms_norm(
    X,
    Weight,
    block_rows: int,
    eps: float,
):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), T.float32)
    Weight: T.Tensor((N,), T.float32)

    Y = T.empty((M, N), T.float32)

    with T.Kernel(
        T.ceildiv(M, block_rows),
        threads=128,
    ) as bx:
        x_local = T.alloc_fragment(
            (block_rows, N),
            T.float32,
        )
        square_local = T.alloc_fragment(
            (block_rows, N),
            T.float32,
        )
        square_sum = T.alloc_fragment(
            (block_rows,),
            T.float32,
        )

        T.copy(
            X[bx * block_rows : (bx + 1) * block_rows, :],
            x_local,
        )

        for i, j in T.Parallel(block_rows, N):
            square_local[i, j] = (
                x_local[i, j] * x_local[i, j]
            )

        T.reduce_sum(
            square_local,
            square_sum,
            dim=1,
        )

        for i in T.Parallel(block_rows):
            square_sum[i] = T.rsqrt(
                square_sum[i] / N + eps
            )

        for i, j in T.Parallel(block_rows, N):
            x_local[i, j] = (
                x_local[i, j]
                * square_sum[i]
                * Weight[j]
            )

        T.copy(
            x_local,
            Y[bx * block_rows : (bx + 1) * block_rows, :],
        )

    return Y

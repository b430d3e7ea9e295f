"""Seed 002 (零基础教程, 七、示例三：Softmax), tilelang_softmax: the program as the seed writes it, imports changed to tilejit; its test_softmax is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_softmax(
    X,
    block_rows: int,
):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)

    with T.Kernel(
        T.ceildiv(M, block_rows),
        threads=128,
    ) as bx:
        x_local = T.alloc_fragment(
            (block_rows, N),
            T.float32,
        )
        row_max = T.alloc_fragment(
            (block_rows,),
            T.float32,
        )
        row_sum = T.alloc_fragment(
            (block_rows,),
            T.float32,
        )

        T.copy(
            X[bx * block_rows : (bx + 1) * block_rows, :],
            x_local,
        )

        T.reduce_max(
            x_local,
            row_max,
            dim=1,
        )

        for i, j in T.Parallel(block_rows, N):
            x_local[i, j] = T.exp(
                x_local[i, j] - row_max[i]
            )

        T.reduce_sum(
            x_local,
            row_sum,
            dim=1,
        )

        for i, j in T.Parallel(block_rows, N):
            x_local[i, j] = (
                x_local[i, j] / row_sum[i]
            )

        T.copy(
            x_local,
            Y[bx * block_rows : (bx + 1) * block_rows, :],
        )

    return Y

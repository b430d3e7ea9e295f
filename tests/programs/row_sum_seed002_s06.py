"""Seed 002 (零基础教程, 六、示例二：Reduce Sum), tilelang_row_sum: the program as the seed writes it, imports changed to tilejit; its test_row_sum is in tests/tilelang/test_seed_programs.py."""
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_row_sum(
    X,
    block_rows: int,
):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M,), T.float32)

    with T.Kernel(
        T.ceildiv(M, block_rows),
        threads=128,
    ) as bx:
        x_local = T.alloc_fragment(
            (block_rows, N),
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

        T.reduce_sum(
            x_local,
            row_sum,
            dim=1,
        )

        T.copy(
            row_sum,
            Y[bx * block_rows : (bx + 1) * block_rows],
        )

    return Y

"""A 2-D elementwise kernel: Y = alpha * X + bias[col], any strides (a transposed
view of X works), tiles of (block_M, block_N)."""
import tilejit
import tilejit.language as T


@tilejit.kernel
def scale_bias(X, bias, Y, alpha, block_M: T.constexpr = 32, block_N: T.constexpr = 64):
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            row = by * block_M + i
            col = bx * block_N + j
            if row < M and col < N:
                Y[row, col] = X[row, col] * alpha + bias[col]


PTX_EXAMPLES = [
    (scale_bias, [((256, 256), "float32"), ((256,), "float32"), ((256, 256), "float32"),
                  1.5], {}, ["ld.global.nc.v4.b32", "st.global.v4.b32"]),
]

"""The seeds' first kernel: C = A + B, one tile of `block` elements per block."""
import tilejit
import tilejit.language as T


@tilejit.kernel
def vector_add(A, B, C, block: T.constexpr = 1024):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = A[idx] + B[idx]


@tilejit.kernel
def relu(X, Y, block: T.constexpr = 2048):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                Y[idx] = T.max(X[idx], 0)


# (kernel, example arguments as (shape, dtype) per tensor, constexprs): what CI
# compiles to PTX and assembles with ptxas
PTX_EXAMPLES = [
    (vector_add, [((4096,), "float32")] * 3, {}, ["ld.global.nc.v4.b32", "st.global.v4.b32"]),
    (relu, [((8192,), "float16")] * 2, {}, ["ld.global.nc.v4", "max.f16"]),
]

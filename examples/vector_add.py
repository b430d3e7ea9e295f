"""The seeds' first kernel: C = A + B, one tile of `block` elements per block (and a
ReLU in the same shape).

    python examples/vector_add.py      # on the GPU when there is one, else simulated
"""
import numpy as np

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


def main():
    try:
        import torch
    except ImportError:
        torch = None
    from tilejit.runtime.cuda_driver import cuda_available
    on_gpu = torch is not None and torch.cuda.is_available() and cuda_available()
    n = 100_003                        # not a multiple of the block
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    x = rng.standard_normal(n).astype(np.float16)
    if on_gpu:
        where = f"GPU ({torch.cuda.get_device_name()})"
        args = [torch.from_numpy(v).cuda() for v in (a, b, np.empty_like(a), x, np.empty_like(x))]
        vector_add(*args[:3])
        relu(*args[3:])
        c, y = args[2].cpu().numpy(), args[4].cpu().numpy()
    else:
        where = "simulator (no CUDA device)"
        c, y = np.full_like(a, np.nan), np.full_like(x, np.nan)
        vector_add(a, b, c)
        relu(x, y)
    ok_add = np.allclose(c, a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)
    ok_relu = np.array_equal(y, np.maximum(x, 0))
    for name, ok in (("vector_add", ok_add), ("relu", ok_relu)):
        print(f"{name} of {n} elements on the {where}: {'passed' if ok else 'FAILED'}")
    assert ok_add and ok_relu


if __name__ == "__main__":
    main()

"""Row sums (seed 002, chapter 8): ``block_M`` rows per block, swept in chunks of
``block_N`` columns.

- ``row_sum``: the seed's way: each chunk reduced into a running sum with
  ``T.reduce_sum(..., clear=False)`` (a block-wide reduction, with its barriers, per chunk);
- ``row_sum_partials``: each thread adds the chunks into its own registers and the block
  reduces once at the end: the loads of the next chunk need not wait for a reduction.

    python examples/row_sum.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def row_sum(X, S, block_M: T.constexpr = 4, block_N: T.constexpr = 1024):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        x = T.alloc_fragment((block_M, block_N), T.float32)
        acc = T.alloc_fragment((block_M,), T.float32)
        T.clear(acc)
        for k in range(T.ceildiv(N, block_N)):
            T.copy(X[bx * block_M, k * block_N], x)     # columns past N read as 0
            T.reduce_sum(x, acc, dim=1, clear=False)
        T.copy(acc, S[bx * block_M])


@tilejit.kernel
def row_sum_partials(X, S, block_M: T.constexpr = 4, block_N: T.constexpr = 1024,
                     threads: T.constexpr = 128):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        x = T.alloc_fragment((block_M, block_N), T.float32)
        part = T.alloc_fragment((block_M, block_N), T.float32)
        acc = T.alloc_fragment((block_M,), T.float32)
        T.clear(part)
        for k in range(T.ceildiv(N, block_N)):
            T.copy(X[bx * block_M, k * block_N], x)     # columns past N read as 0
            for i, j in T.Parallel(block_M, block_N):
                part[i, j] += x[i, j]
        T.reduce_sum(part, acc, dim=1)
        T.copy(acc, S[bx * block_M])


PTX_EXAMPLES = [
    (row_sum, [((64, 4096), "float16"), ((64,), "float32")], {}, ["shfl.sync.bfly"]),
    (row_sum_partials, [((64, 4096), "float16"), ((64,), "float32")], {},
     ["shfl.sync.bfly", "ld.global.nc.v4"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    x = torch.randn(1001 if device == "cuda" else 37, 5000, device=device, dtype=torch.float16)
    s = torch.empty(x.shape[0], device=device, dtype=torch.float32)
    for kernel in (row_sum, row_sum_partials):
        kernel(x, s)
        err = (s.double() - x.double().sum(1)).abs().max().item()
        ok = err < 1e-2
        print(f"{kernel.__name__} {tuple(x.shape)} fp16 on the {where}: max |error| = "
              f"{err:.2e}, {'passed' if ok else 'FAILED'}")
        assert ok


if __name__ == "__main__":
    main()

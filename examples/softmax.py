"""Row softmax, two ways (seed 002, chapter 9):

- ``softmax``: each block holds ``block_M`` whole rows in registers; max and sum are
  ``T.reduce_max``/``T.reduce_sum`` over the fragment; one read and one write of X.
- ``online_softmax``: for rows longer than a block's registers: a first sweep over
  column chunks keeps a running max ``m`` and a running sum rescaled by ``exp(m_old -
  m_new)``; a second sweep writes ``exp(x - m) / s``.

    python examples/softmax.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def softmax(X, Y, block_M: T.constexpr = 1, threads: T.constexpr = 256):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        x = T.alloc_fragment((block_M, N), T.float32)
        m = T.alloc_fragment((block_M,), T.float32)
        s = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], x)
        T.reduce_max(x, m, dim=1)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = T.exp2((x[i, j] - m[i]) * 1.4426950408889634)
        T.reduce_sum(x, s, dim=1)
        for i in T.Parallel(block_M):
            s[i] = 1.0 / s[i]               # one division per row, a multiply per element
        for i, j in T.Parallel(block_M, N):
            x[i, j] = x[i, j] * s[i]
        T.copy(x, Y[bx * block_M, 0])


@tilejit.kernel
def online_softmax(X, Y, block_M: T.constexpr = 1, block_N: T.constexpr = 2048):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        x = T.alloc_fragment((block_M, block_N), T.float32)
        m = T.alloc_fragment((block_M,), T.float32)
        m_chunk = T.alloc_fragment((block_M,), T.float32)
        s = T.alloc_fragment((block_M,), T.float32)
        s_chunk = T.alloc_fragment((block_M,), T.float32)
        T.fill(m, -T.infinity(T.float32))
        T.clear(s)
        for k in range(T.ceildiv(N, block_N)):
            T.copy(X[bx * block_M, k * block_N], x)
            for i, j in T.Parallel(block_M, block_N):      # columns past N must not count
                x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j], -T.infinity(T.float32))
            T.reduce_max(x, m_chunk, dim=1)
            for i in T.Parallel(block_M):
                m_chunk[i] = T.max(m_chunk[i], m[i])
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = T.exp(x[i, j] - m_chunk[i])
            T.reduce_sum(x, s_chunk, dim=1)
            for i in T.Parallel(block_M):
                s[i] = s[i] * T.exp(m[i] - m_chunk[i]) + s_chunk[i]
                m[i] = m_chunk[i]
        for k in range(T.ceildiv(N, block_N)):
            T.copy(X[bx * block_M, k * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = T.exp(x[i, j] - m[i]) / s[i]
            T.copy(x, Y[bx * block_M, k * block_N])


PTX_EXAMPLES = [
    (softmax, [((64, 1024), "float16"), ((64, 1024), "float16")], {},
     ["shfl.sync.bfly", "bar.sync"]),
    (online_softmax, [((64, 8192), "float16"), ((64, 8192), "float16")], {},
     ["shfl.sync.bfly", "bar.sync"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    x = torch.randn(1000 if device == "cuda" else 37, 4096, device=device, dtype=torch.float16)
    for kernel in (softmax, online_softmax):
        y = torch.empty_like(x)
        kernel(x, y)
        err = (y.double() - torch.softmax(x.double(), dim=1)).abs().max().item()
        ok = err < 2e-3
        print(f"{kernel.__name__} {tuple(x.shape)} fp16 on the {where}: max |error| = "
              f"{err:.2e}, {'passed' if ok else 'FAILED'}")
        assert ok


if __name__ == "__main__":
    main()

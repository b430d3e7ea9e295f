"""LayerNorm and RMSNorm forward (seed 002, chapters 11 and 12): one block per
``block_M`` rows held in registers; the statistics are ``T.reduce_sum`` over the row.
The weight (and bias) are copied into fragments laid out like the rows' columns, so each
thread loads, as vectors, just the weights it multiplies.

    y = (x - mean) / sqrt(var + eps) * weight + bias          (layer_norm)
    y = x / sqrt(mean(x^2) + eps) * weight                   (rms_norm)

    python examples/norms.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def layer_norm(X, W, B, Y, eps, block_M: T.constexpr = 1, threads: T.constexpr = 256,
               min_blocks: T.constexpr = None):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=threads, min_blocks_per_sm=min_blocks) as bx:
        x = T.alloc_fragment((block_M, N), T.float32)
        d = T.alloc_fragment((block_M, N), T.float32)
        w = T.alloc_fragment((N,), W.dtype)
        b = T.alloc_fragment((N,), B.dtype)
        mean = T.alloc_fragment((block_M,), T.float32)
        var = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], x)
        T.reduce_sum(x, mean, dim=1)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = x[i, j] - mean[i] / N          # centred in place
            d[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(d, var, dim=1)
        T.copy(W, w)        # each thread loads the weights of its own columns
        T.copy(B, b)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = x[i, j] * T.rsqrt(var[i] / N + eps) * w[j] + b[j]
        T.copy(x, Y[bx * block_M, 0])


@tilejit.kernel
def rms_norm(X, W, Y, eps, block_M: T.constexpr = 1, threads: T.constexpr = 256):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        x = T.alloc_fragment((block_M, N), T.float32)
        sq = T.alloc_fragment((block_M, N), T.float32)
        w = T.alloc_fragment((N,), W.dtype)
        ms = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], x)
        T.copy(W, w)
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(sq, ms, dim=1)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = x[i, j] * T.rsqrt(ms[i] / N + eps) * w[j]
        T.copy(x, Y[bx * block_M, 0])


PTX_EXAMPLES = [
    (layer_norm, [((64, 1024), "float16"), ((1024,), "float16"), ((1024,), "float16"),
                  ((64, 1024), "float16"), 1e-5], {}, ["shfl.sync.bfly", "sqrt.rn.f32"]),
    (rms_norm, [((64, 1024), "float16"), ((1024,), "float16"), ((64, 1024), "float16"),
                1e-5], {}, ["shfl.sync.bfly", "sqrt.rn.f32"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    M, N = (1000, 4096) if device == "cuda" else (37, 512)
    x = torch.randn(M, N, device=device, dtype=torch.float16)
    w = torch.randn(N, device=device, dtype=torch.float16)
    b = torch.randn(N, device=device, dtype=torch.float16)
    y = torch.empty_like(x)
    layer_norm(x, w, b, y, 1e-5)
    ref = torch.nn.functional.layer_norm(x.double(), (N,), w.double(), b.double(), 1e-5)
    err = (y.double() - ref).abs().max().item()
    ok = err < 2e-2
    print(f"layer_norm {M}x{N} fp16 on the {where}: max |error| = {err:.2e}, "
          f"{'passed' if ok else 'FAILED'}")
    assert ok
    rms_norm(x, w, y, 1e-5)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(1, keepdim=True) + 1e-5) * w.double()
    err = (y.double() - ref).abs().max().item()
    ok = err < 2e-2
    print(f"rms_norm {M}x{N} fp16 on the {where}: max |error| = {err:.2e}, "
          f"{'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

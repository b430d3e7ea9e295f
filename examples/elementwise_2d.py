"""A 2-D elementwise kernel: Y = alpha * X + bias[col], any strides (a transposed
view of X works), tiles of (block_M, block_N).

    python examples/elementwise_2d.py  # on the GPU when there is one, else simulated
"""
import numpy as np

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


def main():
    try:
        import torch
    except ImportError:
        torch = None
    from tilejit.runtime.cuda_driver import cuda_available
    on_gpu = torch is not None and torch.cuda.is_available() and cuda_available()
    M, N = (2000, 3000) if on_gpu else (200, 300)
    rng = np.random.default_rng(0)
    xt = rng.standard_normal((N, M), dtype=np.float32)   # X is a transposed view of xt
    bias = rng.standard_normal(N, dtype=np.float32)
    alpha = 1.5
    if on_gpu:
        where = f"GPU ({torch.cuda.get_device_name()})"
        x_d, bias_d = torch.from_numpy(xt).cuda().T, torch.from_numpy(bias).cuda()
        y_d = torch.empty(M, N, device="cuda")
        scale_bias(x_d, bias_d, y_d, alpha)
        y = y_d.cpu().numpy()
    else:
        where = "simulator (no CUDA device)"
        y = np.full((M, N), np.nan, dtype=np.float32)
        scale_bias(xt.T, bias, y, alpha)
    ok = np.allclose(y, xt.T.astype(np.float64) * alpha + bias, rtol=1e-5, atol=1e-5)
    print(f"scale_bias {M}x{N} (X transposed) on the {where}: {'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

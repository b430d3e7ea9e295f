"""GEMM with a fused epilogue: C = relu(A @ B + bias), the bias and ReLU applied to the
accumulator in registers after the K loop, before the one store of C.

    python examples/gemm_epilogue.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def matmul_bias_relu(A, B, bias, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
                     block_K: T.constexpr = 32):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        for i, j in T.Parallel(block_M, block_N):
            col = bx * block_N + j
            b = T.if_then_else(col < N, bias[T.min(col, N - 1)], 0.0)
            C_f[i, j] = T.max(C_f[i, j] + b, 0.0)
        T.copy(C_f, C[by * block_M, bx * block_N])


PTX_EXAMPLES = [
    (matmul_bias_relu, [((256, 256), "float16"), ((256, 256), "float16"), ((256,), "float32"),
                        ((256, 256), "float16")],
     {}, ["mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned", "max.f32"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    M, N, K = (1024, 1000, 512) if device == "cuda" else (256, 200, 96)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    bias = torch.randn(N, dtype=torch.float32, device=device)
    c = torch.empty(M, N, dtype=torch.float16, device=device)
    matmul_bias_relu(a, b, bias, c)
    ref = torch.relu(a.double() @ b.double() + bias.double())
    err = (c.double() - ref).abs().max().item()
    ok = err < 2e-2 * (1 + ref.abs().max().item())
    print(f"gemm + bias + relu {M}x{N}x{K} on the {where}: max |error| vs float64 = "
          f"{err:.2e}, {'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

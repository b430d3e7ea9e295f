"""SPEC's first kernel: a tiled GEMM on the tensor cores (mma.sync + ldmatrix).

    python examples/gemm.py            # on the GPU when there is one, else simulated
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def matmul(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
           block_K: T.constexpr = 32, num_stages: T.constexpr = 3):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


# the kernels whose PTX CI assembles (tests/support/ptx_examples.py): (kernel, argument shapes
# and dtypes, the instructions the PTX must contain)
PTX_EXAMPLES = [
    (matmul, [((256, 256), "float16"), ((256, 256), "float16"), ((256, 256), "float32")],
     {}, ["mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned", "bar.sync"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    M, N, K = (1024, 1024, 512) if device == "cuda" else (256, 192, 128)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = torch.empty(M, N, dtype=torch.float32, device=device)
    matmul(a, b, c)
    ref = a.double() @ b.double()
    err = (c.double() - ref).abs().max().item()
    ok = err < 1e-2 * (1 + ref.abs().max().item())
    print(f"gemm {M}x{N}x{K} fp16 on the {where}: max |error| vs float64 = {err:.2e}, "
          f"{'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

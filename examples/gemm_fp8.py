"""A float8 GEMM as inference engines run one: C = (A · Bᵀ) · scale in bfloat16, A (M, K)
and B (N, K) in float8_e4m3 (both K-major, as the tensor cores read 8-bit operands, and
as torch._scaled_mm takes them), accumulated in float32. On sm_90a: wgmma k32 from
TMA-loaded 128-byte swizzled tiles, warp-specialized across the persistent loop; on
sm_89: mma.sync m16n8k32.

    python examples/gemm_fp8.py        # on an sm_89+ GPU when there is one, else simulated
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def matmul_fp8(A, B, C, scale: T.float32, block_M: T.constexpr = 128,
               block_N: T.constexpr = 256, block_K: T.constexpr = 128,
               threads: T.constexpr = 256, num_stages: T.constexpr = 3,
               sms: T.constexpr = 132):
    M, K = A.shape
    N = B.shape[0]
    with T.Kernel(sms, threads=threads) as block_id:
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_N, block_K), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sms,
                                   block_id):
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy(B[by * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_s[i, j] = C_f[i, j] * scale
            T.copy(C_s, C[bx * block_M, by * block_N])


def reference(a, b, scale):
    """(A · Bᵀ) · scale in float64, rounded to C's bfloat16."""
    return ((a.double() @ b.double().T) * scale).to(torch.bfloat16)


def main():
    cuda = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)
    device = "cuda" if cuda else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if cuda else "simulator"
    M, N, K = (2048, 2048, 1024) if cuda else (256, 256, 256)
    a = torch.randn(M, K, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device=device).to(torch.float8_e4m3fn)
    c = torch.empty(M, N, dtype=torch.bfloat16, device=device)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 4
    matmul_fp8(a, b, c, 0.25, sms=sms)
    ref = reference(a, b, 0.25)
    err = (c.double() - ref.double()).abs().max().item()
    ok = err <= 1e-2 * (1 + ref.double().abs().max().item())
    print(f"fp8 e4m3 gemm {M}x{N}x{K} on the {where}: max |error| vs float64 = {err:.2e}, "
          f"{'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

"""TileLang's hand-written MMA path (examples/gemm/example_gemm_intrinsics.py): a GEMM whose
warps issue ldmatrix and mma.sync themselves through ``TensorCoreIntrinEmitter``, for what
``T.gemm`` does not cover (your own accumulator layout, instructions interleaved with your
own memory accesses). The emitter works out which lane holds which element; the local
arrays hold PTX's mma fragments, the same in the simulator as on the GPU.

    python examples/gemm_intrinsics.py     # on the GPU when there is one, else simulated
"""
import torch

import tilejit
import tilejit.language as T
from tilejit.tilelang.intrinsics.mma_macro_generator import TensorCoreIntrinEmitter


def make_matmul(M, N, K, in_dtype="float16", accum_dtype="float32", block_row_warps=2,
                block_col_warps=2, warp_row_tiles=64, warp_col_tiles=64, chunk=32,
                num_stages=2):
    """C (M, N) = A (M, K) · B (N, K)^T."""
    mma_emitter = TensorCoreIntrinEmitter(
        a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum_dtype,
        a_transposed=False, b_transposed=True,
        block_row_warps=block_row_warps, block_col_warps=block_col_warps,
        warp_row_tiles=warp_row_tiles, warp_col_tiles=warp_col_tiles, chunk=chunk)
    micro_x, micro_y, micro_k = (mma_emitter.micro_size_x, mma_emitter.micro_size_y,
                                 mma_emitter.micro_size_k)
    block_M = block_row_warps * warp_row_tiles
    block_N = block_col_warps * warp_col_tiles
    block_K = chunk
    warp_rows, warp_cols = mma_emitter.warp_rows, mma_emitter.warp_cols

    @tilejit.kernel
    def matmul(A, B, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=mma_emitter.threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_shared = T.alloc_shared((block_M // micro_x, block_N // micro_y, micro_x,
                                       micro_y), accum_dtype)
            A_local = T.alloc_local((warp_rows * mma_emitter.local_size_a), in_dtype)
            B_local = T.alloc_local((warp_cols * mma_emitter.local_size_b), in_dtype)
            C_local = T.alloc_local((warp_rows * warp_cols * mma_emitter.local_size_out),
                                    accum_dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                for ki in T.serial(0, block_K // micro_k):
                    mma_emitter.ldmatrix_a(A_local, A_shared, ki)    # ldmatrix.x4
                    mma_emitter.ldmatrix_b(B_local, B_shared, ki)    # ldmatrix.x4
                    mma_emitter.mma(A_local, B_local, C_local)       # mma.sync.m16n8k16
            mma_emitter.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = C_shared[
                    i // micro_x, j // micro_y, i % micro_x, j % micro_y]

    return matmul


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    M, N, K = (1024, 1024, 1024) if device == "cuda" else (256, 128, 64)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(N, K, dtype=torch.float16, device=device)
    c = torch.empty(M, N, dtype=torch.float32, device=device)
    make_matmul(M, N, K)(a, b, c)
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    ok = err < 1e-2 * (1 + ref.abs().max().item())
    print(f"gemm (TensorCoreIntrinEmitter) {M}x{N}x{K} fp16 on the {where}: max |error| vs "
          f"float64 = {err:.2e}, {'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

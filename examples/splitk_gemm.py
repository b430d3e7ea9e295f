"""Split-K GEMM: the K dimension is cut into ``splits`` parts, one per grid z index;
each block computes its part of a C tile on the tensor cores and adds it into C with
``T.atomic_add`` on the region (float32 C, zero-initialized). Useful when M and N are
small and K is long: more blocks than output tiles.

    python examples/splitk_gemm.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def splitk_gemm(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                block_K: T.constexpr = 32, splits: T.constexpr = 4):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits,
                  threads=128) as (bx, by, bz):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        steps = T.ceildiv(T.ceildiv(K, block_K), splits)    # k steps per split
        for s in T.Pipelined(steps, num_stages=3):
            T.copy(A[by * block_M, (bz * steps + s) * block_K], A_s)   # past K: zeros
            T.copy(B[(bz * steps + s) * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.atomic_add(C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], C_f)


PTX_EXAMPLES = [
    (splitk_gemm, [((256, 1024), "float16"), ((1024, 256), "float16"), ((256, 256), "float32")],
     {}, ["mma.sync.aligned.m16n8k16", "cp.async.cg.shared.global", "atom.global.add.f32"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    M, N, K = (512, 384, 4096) if device == "cuda" else (128, 96, 512)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = torch.zeros(M, N, dtype=torch.float32, device=device)
    splitk_gemm(a, b, c)
    ref = a.double() @ b.double()
    err = (c.double() - ref).abs().max().item()
    ok = err < 1e-2 * (1 + ref.abs().max().item())
    print(f"split-K gemm {M}x{N}x{K} on the {where}: max |error| vs float64 = {err:.2e}, "
          f"{'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

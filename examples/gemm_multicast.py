"""A persistent GEMM in thread block clusters, as TileLang writes one: the blocks of a
cluster (``T.ClusterKernel(..., cluster_dims=2)``) take neighbouring row-blocks of C in
one column-block, so at each step of K they need the same tile of B, and
``T.copy_cluster(..., cluster_mask=0b11)`` names it in both. On sm_90a the compiler
issues that load once, multicast by TMA into both blocks' shared memory (each block
issues half of its boxes), and releases each pipeline stage only when the consumers of
both blocks are done with it; elsewhere each block loads its own copy.

On the H200 this is level with the kernel without clusters (run.py's persistent GEMM)
at 4096³ and 8192³ (``benchmarks/experiments/gemm_cluster.py``): it shows the cluster
forms, it is not the faster kernel.

    python examples/gemm_multicast.py     # on an sm_90 GPU when there is one, else simulated
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def matmul_multicast(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                     block_K: T.constexpr = 64, threads: T.constexpr = 256,
                     num_stages: T.constexpr = 3, sms: T.constexpr = 132,
                     cluster: T.constexpr = 2):
    M, K = A.shape
    N = B.shape[1]
    with T.ClusterKernel(sms, threads=threads, cluster_dims=cluster) as block_id:
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        rank = T.block_rank_in_cluster()
        # the clusters walk (cluster × block_M) × block_N tiles; a block takes its rank's rows
        for cx, by in T.Persistent([T.ceildiv(M, block_M * cluster), T.ceildiv(N, block_N)],
                                   sms // cluster, block_id // cluster):
            bx = cx * cluster + rank
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy_cluster(B[k * block_K, by * block_N], B_s,
                               cluster_mask=(1 << cluster) - 1)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            T.copy(C_s, C[bx * block_M, by * block_N])


def reference(a, b):
    return (a.double() @ b.double()).to(a.dtype)


def main():
    cuda = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)
    device = "cuda" if cuda else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if cuda else "simulator"
    M, N, K = (2000, 1536, 1024) if cuda else (320, 512, 128)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    c = torch.empty(M, N, device=device, dtype=torch.float16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count // 2 * 2 if cuda else 4
    matmul_multicast(a, b, c, sms=sms)
    ref = reference(a, b)
    err = (c.double() - ref.double()).abs().max().item()
    ok = err <= 1e-2 * (1 + ref.double().abs().max().item())
    print(f"gemm in clusters of 2, B multicast, {M}x{N}x{K} on the {where}: max |error| vs "
          f"float64 = {err:.2e}, {'passed' if ok else 'FAILED'}")
    assert ok


if __name__ == "__main__":
    main()

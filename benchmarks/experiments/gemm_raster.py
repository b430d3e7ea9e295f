"""The persistent GEMM's L2 rasterization: T.Persistent's panel height (group_size) and
the plain kernel's T.use_swizzle panel, beside cuBLAS in one process, interleaved:

    python benchmarks/experiments/gemm_raster.py [--json FILE] [--groups 8,16]

Why: ncu at 4096³ (128×256×64, group 8, 602515f) read 186 MB from DRAM for 64 MB of
operands (L2 read hit rate 63 %), and the consumers' top stall was the wait for a
stage. A wave of 132 tiles in panels of G rows of 128 touches G·128 rows of A and
132/G columns of 256 of B: 8 → 41 MB, 16 → 33 MB of operands per wave.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

import torch  # noqa: E402

import tilejit  # noqa: E402
import tilejit.language as T  # noqa: E402
from experiment_support import write_results  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402
from run import gemm_kernel  # noqa: E402


@tilejit.kernel
def persistent_grouped(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                       block_K: T.constexpr = 64, threads: T.constexpr = 256,
                       num_stages: T.constexpr = 3, sms: T.constexpr = 132,
                       group: T.constexpr = 8):
    """benchmarks/run.py's persistent kernel with T.Persistent's group_size a parameter."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(sms, threads=threads) as (block_id):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sms,
                                   block_id, group_size=group):
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            T.copy(C_s, C[bx * block_M, by * block_N])


def main():
    args = sys.argv[1:]
    out = args[args.index("--json") + 1] if "--json" in args else None
    groups = [int(g) for g in (args[args.index("--groups") + 1] if "--groups" in args
                               else "4,8,12,16,24").split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for n in (4096, 8192):
            a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            ref = a @ b
            tag = f"{str(dtype)[6:]} {n}^3"
            variants = [(f"cuBLAS {tag}", lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))]
            for g in groups:
                variants.append((f"persistent group {g} {tag}",
                                 lambda g=g, a=a, b=b, c=c: persistent_grouped(
                                     a, b, c, sms=sms, group=g)))
            for p in (8, 16):
                variants.append((f"plain 128x256x64 s3 panel {p} {tag}",
                                 lambda p=p, a=a, b=b, c=c: gemm_kernel(
                                     a, b, c, block_M=128, block_N=256,
                                                         block_K=64, threads=256,
                                                         num_stages=3, panel=p)))
            for name, fn in variants:
                c.zero_()
                fn()
                torch.cuda.synchronize()
                err = (c.float() - ref.float()).abs().max().item()
                assert err < 0.05 * (1 + ref.float().abs().max().item()), (name, err)
            times = interleaved_times(variants, rounds=len(variants))
            base = min(times[variants[0][0]])
            for name, _ in variants:
                best = min(times[name])
                rows.append({"name": name, "ms": best, "TFLOP/s": 2 * n ** 3 / best / 1e9,
                             "vs cuBLAS": base / best})
                print(f"{name:44s} {best:7.3f} ms {2 * n ** 3 / best / 1e9:7.1f} TF "
                      f"{base / best:6.3f}", flush=True)
    if out:
        write_results(out, rows)


if __name__ == "__main__":
    main()

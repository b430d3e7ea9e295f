"""The GEMM's epilogue: the accumulator stored straight from registers (the benchmark's
kernels) against staged through a shared tile (``T.copy(C_f, C_s); T.copy(C_s, C)``, as
TileLang's Hopper examples write it), non-persistent and persistent, beside cuBLAS in one
process; each checked against torch, then timed in interleaved rounds (best kept).
Since 19b2b86 the compiler stages the direct form itself on sm_90a when the tile fits
(passes/epilogue_staging.py), so "direct" differs from "staged" only where it does not.

    python benchmarks/experiments/gemm_epilogue.py [--json FILE] [--sizes 4096,8192]
        [--dtypes float16] [--stages 3,4]
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

import torch  # noqa: E402

import tilejit  # noqa: E402
import tilejit.language as T  # noqa: E402
from experiment_support import write_results  # noqa: E402
from run import gemm_kernel, gemm_persistent_kernel  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402


@tilejit.kernel
def gemm_staged(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                block_K: T.constexpr = 64, threads: T.constexpr = 256,
                num_stages: T.constexpr = 3, panel: T.constexpr = 8):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        T.use_swizzle(panel_size=panel, enable=panel > 0)
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C_s)
        T.copy(C_s, C[by * block_M, bx * block_N])


# run.py's persistent kernel is the seed's listing, staged through C_s (it was the direct
# form when the 2d9a699 and 1e8323e results were taken, with this file's own staged copy)
KERNELS = {"direct": gemm_kernel, "staged": gemm_staged,
           "persistent_staged": gemm_persistent_kernel}


def option(args, flag, default):
    return args[args.index(flag) + 1] if flag in args else default


def one(dtype, n, stages):
    a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fns = [("cuBLAS", lambda: torch.matmul(a, b, out=c))]
    for name, kernel in KERNELS.items():
        for s in stages:
            cfg = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=s)
            if "persistent" in name:
                cfg["sms"] = sms
            label = f"{name} s{s}"
            c.zero_()
            try:
                kernel(a, b, c, **cfg)
                torch.cuda.synchronize()
            except Exception as e:      # a configuration that does not fit is reported
                print(f"{label}: {type(e).__name__}: {e}", flush=True)
                continue
            err = (c.float() - ref).abs().max().item()
            assert err < 0.05 * (1 + ref.abs().max().item()), (label, err)
            fns.append((label, lambda kernel=kernel, cfg=cfg: kernel(a, b, c, **cfg)))
    times = interleaved_times(fns, rounds=len(fns) * 2)
    best = min(times["cuBLAS"])
    rows = []
    for name, _ in fns:
        ms = min(times[name])
        rows.append({"dtype": str(dtype), "n": n, "name": name, "ms": ms,
                     "TFLOP/s": 2 * n ** 3 / ms / 1e9, "vs cuBLAS": best / ms})
        print(f"{str(dtype):15s} {n} {name:22s} {ms:8.3f} ms {rows[-1]['TFLOP/s']:7.1f} TF "
              f"{rows[-1]['vs cuBLAS']:6.3f}", flush=True)
    return rows


def main():
    args = sys.argv[1:]
    out = option(args, "--json", None)
    sizes = [int(x) for x in option(args, "--sizes", "4096,8192").split(",")]
    dtypes = option(args, "--dtypes", "float16").split(",")
    stages = [int(x) for x in option(args, "--stages", "3,4").split(",")]
    rows = []
    for dtype in dtypes:
        for n in sizes:
            rows += one(getattr(torch, dtype), n, stages)
    if out:
        write_results(out, rows, experiment="gemm_epilogue")


if __name__ == "__main__":
    main()

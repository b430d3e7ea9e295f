"""Experiment: the pipelined GEMM with its last k step run across the barrier (the
default) against the plain schedule (TILEJIT_EXPERIMENT_NO_GEMM_SPLIT=1 at compile
time), beside cuBLAS, in the same process. JSON to argv[1] if given.

    TILEJIT_DISABLE_CACHE=1 python benchmarks/experiments/gemm_split_ab.py [FILE]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch  # noqa: E402

import tilejit  # noqa: E402
from run import gemm_kernel  # noqa: E402
from tilejit.testing_support import median_ms  # noqa: E402

CONFIGS = [(256, 128, 64, 256, 4), (256, 128, 64, 256, 3), (128, 256, 64, 256, 4),
           (128, 128, 32, 128, 4), (128, 128, 64, 128, 3)]


def main():
    plain = tilejit.kernel(gemm_kernel.func)
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for n in (4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            ref = (a @ b).float()
            variants = [("cublas", lambda: torch.matmul(a, b, out=c))]
            for bm, bn, bk, t, s in CONFIGS:
                cfg = dict(block_M=bm, block_N=bn, block_K=bk, threads=t, num_stages=s)
                for label, k in (("split", gemm_kernel), ("plain", plain)):
                    os.environ["TILEJIT_EXPERIMENT_NO_GEMM_SPLIT"] = "1" if label == "plain" else "0"
                    c.zero_()
                    k(a, b, c, **cfg)
                    torch.cuda.synchronize()
                    err = (c.float() - ref).abs().max().item()
                    assert err < 0.05 * (1 + ref.abs().max().item()), (label, cfg, err)
                    variants.append((f"{label} {bm}x{bn}x{bk} t{t} s{s}",
                                     lambda k=k, cfg=cfg: k(a, b, c, **cfg)))
            times = {name: [] for name, _ in variants}
            for _ in range(3):
                for name, fn in variants:
                    times[name].append(median_ms(fn))
            base = min(times["cublas"])
            for name, _ in variants:
                best = min(times[name])
                row = dict(dtype=str(dtype).split(".")[-1], n=n, name=name, ms=best,
                           tflops=2 * n ** 3 / best / 1e9, vs_cublas=base / best)
                rows.append(row)
                print(f"{row['dtype']:9s} {n:5d} {name:32s} {best:8.3f} ms "
                      f"{row['tflops']:7.1f} TFLOP/s {row['vs_cublas']:6.3f}")
    if len(sys.argv) > 1:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"),
                  indent=1)


if __name__ == "__main__":
    main()

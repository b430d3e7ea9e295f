"""SM clock, board power and throughput while cuBLAS and tilejit's persistent GEMM each
run back to back for a few seconds, in one process:

    python benchmarks/experiments/gemm_clocks.py [--json FILE] [--seconds S] [--n N]

Why: at 4096³ under ncu's locked base clock the persistent GEMM keeps the tensor pipe
busy 89 % of the time, yet at boost clocks it runs at 0.90-1.02 of cuBLAS. Equal
TFLOP/s per GHz at a lower clock means the gap is energy per unit of work (data moved),
not the schedule. Sampling as in ``clocks_power.py``.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks"),
                os.path.join(ROOT, "benchmarks", "experiments")]

import torch  # noqa: E402

from clocks_power import sample  # noqa: E402
from experiment_support import write_results  # noqa: E402
from run import gemm_persistent_kernel  # noqa: E402


def main():
    args = sys.argv[1:]
    out = args[args.index("--json") + 1] if "--json" in args else None
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 3.0
    n = int(args[args.index("--n") + 1]) if "--n" in args else 4096
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3, sms=sms)
    cases = []
    for dtype in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        name = str(dtype).split(".")[1]
        cases += [(f"cuBLAS {name} {n}^3", lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)),
                  (f"tilejit persistent 128x256x64 s3 {name} {n}^3",
                   lambda a=a, b=b, c=c: gemm_persistent_kernel(a, b, c, **cfg))]
    for _, fn in cases:
        fn()
    torch.cuda.synchronize()
    results = []
    flops = 2 * n ** 3
    for rnd in range(2):
        for name, fn in (cases if rnd == 0 else cases[::-1]):
            rate, rows = sample(fn, seconds)
            clk = sum(r[0] for r in rows) / max(len(rows), 1)
            pw = sum(r[1] for r in rows) / max(len(rows), 1)
            tf = rate * flops / 1e12
            reasons = sorted({r[3] for r in rows})
            results.append({"round": rnd, "name": name, "TFLOP/s": tf, "sm_clock_MHz": clk,
                            "power_W": pw, "TFLOP/s per GHz": tf / (clk / 1e3) if clk else None,
                            "throttle": reasons, "samples": len(rows),
                            "variant": os.environ.get("TJX_VARIANT", "")})
            print(f"r{rnd} {name:44s} {tf:7.1f} TF  {clk:6.0f} MHz  {pw:6.1f} W  "
                  f"{tf / (clk / 1e3) if clk else 0:6.1f} TF/GHz  {reasons}", flush=True)
    if out:
        write_results(out, results)


if __name__ == "__main__":
    main()

"""SM clock and board power while each kernel runs back to back for a few seconds:
tilejit's attention and GEMM beside FA2, cuDNN and cuBLAS, in one process.

    python benchmarks/experiments/clocks_power.py [--json FILE] [--seconds S]
        [--attention BM,BN,THREADS;...] [--dtypes float16,bfloat16]

With ``--attention`` only the non-causal forward is run: cuDNN and tilejit's kernel in
each configuration named (two stages, fast_math), for each dtype named (default
float16); without it, the original set (FA2, tilejit's default, cuDNN, causal and not,
and the GEMMs).

Why: under ncu's locked base clock tilejit's attention ran at FA2's speed (3.97 vs
4.00 ms) but at boost clocks FA2 keeps 1-6 %; if the two kernels settle at different
clocks (power or thermal limits), the gap is energy per unit of work, not schedule.
``nvidia-smi --query-gpu=... -lms 50`` samples in the background; the first 0.5 s of
each kernel's window is dropped.
"""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples")]

import torch  # noqa: E402

import tilejit  # noqa: E402
from experiment_support import write_results  # noqa: E402

QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
if subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"],
                  capture_output=True).returncode:
    QUERY = QUERY.replace("clocks_event_reasons", "clocks_throttle_reasons")


def sample(fn, seconds):
    """(calls per second, [(clock MHz, power W, temp C, throttle bits)...])."""
    proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                             "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.2)
    t0 = time.time()
    calls, marks = 0, []
    while time.time() - t0 < seconds:
        for _ in range(5):
            fn()
        calls += 5
        torch.cuda.synchronize()
        marks.append((time.time() - t0, calls))
    proc.terminate()
    out = proc.communicate()[0]
    rows = []
    for line in out.strip().splitlines()[int(0.7 / 0.05):]:
        parts = [p.strip() for p in line.split(",")]
        try:
            rows.append((float(parts[1]), float(parts[2]), float(parts[3]),
                         parts[4] if len(parts) > 4 else "?"))
        except (ValueError, IndexError):
            pass
    # throughput over the last part of the window (after 0.5 s)
    start = next((m for m in marks if m[0] >= 0.5), marks[0])
    end = marks[-1]
    rate = (end[1] - start[1]) / max(end[0] - start[0], 1e-9)
    return rate, rows


def main():
    args = sys.argv[1:]
    out = args[args.index("--json") + 1] if "--json" in args else None
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 3.0
    from flash_attention.flash_attn import flashattn
    from run import gemm_kernel
    from torch.nn.attention import SDPBackend, sdpa_kernel
    fa = tilejit.kernel(flashattn.func, fast_math=True)
    b, h, s, d = 4, 32, 4096, 128
    if "--attention" in args:
        configs = [tuple(map(int, c.split(",")))
                   for c in args[args.index("--attention") + 1].split(";")]
        dtypes = (args[args.index("--dtypes") + 1].split(",") if "--dtypes" in args
                  else ["float16"])
        cases = []
        for name in dtypes:
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=getattr(torch, name))
                       for _ in range(3))
            cases += _attention_cases(fa, q, k, v, configs, name)
        return _measure(cases, seconds, out)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.empty_like(q)
    n = 8192
    a, bm = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    gcfg = dict(block_M=128, block_N=128, block_K=64, threads=128, num_stages=3)

    def sdpa(backend, causal):
        def run():
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        return run
    cases = []
    for causal in (False, True):
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        cases += [(f"FA2 causal={causal}", sdpa(SDPBackend.FLASH_ATTENTION, causal), flops),
                  (f"tilejit attention causal={causal}",
                   lambda causal=causal: fa(q, k, v, o, is_causal=causal), flops),
                  (f"cuDNN causal={causal}", sdpa(SDPBackend.CUDNN_ATTENTION, causal), flops)]
    cases += [("cuBLAS 8192^3", lambda: torch.matmul(a, bm, out=c), 2 * n ** 3),
              ("tilejit GEMM 128x128x64 s3 8192^3", lambda: gemm_kernel(a, bm, c, **gcfg),
               2 * n ** 3)]
    _measure(cases, seconds, out)


def _attention_cases(fa, q, k, v, configs, tag):
    """cuDNN and tilejit's forward (non-causal) in each configuration, on these tensors."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, s, h, d = q.shape
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.empty_like(q)
    flops = 4 * b * h * s * s * d

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
    cases = [(f"cuDNN {tag}", cudnn, flops)]
    for bm, bn, threads in configs:
        cfg = dict(block_M=bm, block_N=bn, threads=threads, num_stages=2)
        cases.append((f"tilejit {bm}x{bn} t{threads} {tag}",
                      lambda cfg=cfg: fa(q, k, v, o, **cfg), flops))
    return cases


def _measure(cases, seconds, out):
    for _, fn, _ in cases:      # compile and warm
        fn()
    torch.cuda.synchronize()
    results = []
    for rnd in range(2):
        for name, fn, flops in (cases if rnd == 0 else cases[::-1]):
            time.sleep(1.0)     # let the board cool a little between kernels
            rate, rows = sample(fn, seconds)
            clk = sum(r[0] for r in rows) / max(len(rows), 1)
            pw = sum(r[1] for r in rows) / max(len(rows), 1)
            temp = max((r[2] for r in rows), default=0)
            reasons = sorted({r[3] for r in rows})
            tf = rate * flops / 1e12
            results.append({"round": rnd, "name": name, "TFLOP/s": tf, "sm_clock_MHz": clk,
                            "power_W": pw, "max_temp_C": temp, "throttle": reasons,
                            "TFLOP/s per GHz": tf / (clk / 1e3) if clk else None,
                            "samples": len(rows)})
            print(f"r{rnd} {name:38s} {tf:7.1f} TF  {clk:6.0f} MHz  {pw:6.1f} W  "
                  f"{temp:4.0f} C  {tf / (clk / 1e3) if clk else 0:6.1f} TF/GHz  {reasons}",
                  flush=True)
    if out:
        write_results(out, results)


if __name__ == "__main__":
    main()

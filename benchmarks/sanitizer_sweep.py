"""compute-sanitizer over every example kernel and the benchmark GEMMs, on the GPU:

    python benchmarks/sanitizer_sweep.py [--tools memcheck,racecheck,synccheck,initcheck]
                                         [--jobs 4] [--json FILE] [--only WORD]

Each (kernel, tool) pair runs in its own process under ``compute-sanitizer --tool T``,
launching that one kernel once on random inputs of its PTX_EXAMPLES shapes (the GEMMs
of ``benchmarks/run.py`` at 512³). ``--kernel-name`` limits the checks to the tilejit
kernel, so torch's own kernels (the random inputs) are not checked. Under memcheck the
host API errors of cuda-bindings' own ``cuGetProcAddress_v2`` probing are not kernel
errors: ``--report-api-errors no`` leaves them out. A pair is clean when the tool prints
"ERROR SUMMARY: 0 errors" and exits 0. Prints a table; ``--json`` writes every pair's
result with the date, commit and GPU.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def _paths():
    for sub in ("", "examples", os.path.join("tests", "support"), "benchmarks",
                os.path.join("examples", "flash_attention")):
        path = os.path.join(ROOT, sub)
        if path not in sys.path:
            sys.path.insert(0, path)


def cases():
    """name -> (kernel, argument specs, constexprs): the examples' PTX_EXAMPLES and the
    benchmark GEMM's two best configs and its persistent kernel at 512^3."""
    _paths()
    from ptx_examples import all_examples
    out = {}
    for name, kernel, specs, constexprs, _ in all_examples():
        label = name + "".join(f".{k}={v}" for k, v in sorted(constexprs.items()))
        out[label] = (kernel, specs, constexprs)
    import run
    for cfg in ({"block_M": 128, "block_N": 256, "block_K": 64, "threads": 256,
                 "num_stages": 3},
                {"block_M": 128, "block_N": 128, "block_K": 64, "threads": 128,
                 "num_stages": 3}):
        label = "bench.gemm_kernel." + "x".join(str(v) for v in cfg.values())
        out[label] = (run.gemm_kernel, [((512, 512), "float16")] * 3, cfg)
    # the persistent kernel (warp-specialized, TMA-stored epilogue) with fewer blocks than
    # tiles, so that blocks store a tile while loading the next
    cfg = dict(run.PERSISTENT_CONFIGS[0], sms=3)
    out["bench.gemm_persistent_kernel." + "x".join(str(v) for v in cfg.values())] = (
        run.gemm_persistent_kernel, [((512, 512), "float16")] * 3, cfg)
    # the attention benchmark's warp-specialized configurations (two and three consumer
    # warpgroups), a length no block shape divides
    import tilejit
    from flash_attn import flashattn
    fast = tilejit.kernel(flashattn.func, fast_math=True)
    for config in run.ATTENTION_CONFIGS[1:]:
        for causal in (False, True):
            cfg = {k: v for k, v in config.items() if k != "fast_math"}
            cfg["is_causal"] = causal
            label = "bench.flashattn." + "x".join(str(v) for v in cfg.values())
            out[label] = (fast, [((1, 500, 2, 128), "float16")] * 4, cfg)
    return out


def run_one(name: str) -> None:
    """Launch one case once (what each sanitizer process runs)."""
    import torch
    kernel, specs, constexprs = cases()[name]
    torch.manual_seed(0)
    args = []
    for spec in specs:
        if isinstance(spec, tuple):
            shape, dtype = spec
            dtype = getattr(torch, dtype)
            # made on the host and copied: a copy initializes the bytes for initcheck,
            # which does not follow torch's kernels outside --kernel-name
            host = (torch.randn(shape).to(dtype) if dtype.is_floating_point
                    else torch.zeros(shape, dtype=dtype))
            args.append(host.to("cuda"))
        else:
            args.append(spec)
    kernel(*args, **constexprs)
    torch.cuda.synchronize()
    print(f"launched {name}")


def entry_name(kernel) -> str:
    return re.sub(r"\W", "_", kernel.source.tree.name) + "_kernel"


def sanitize(sanitizer: str, tool: str, name: str, kernel, timeout: int = 300) -> dict:
    command = [sanitizer, "--tool", tool, "--kernel-name", f"kns={entry_name(kernel)}",
               "--print-limit", "20", "--error-exitcode", "3"]
    if tool == "memcheck":
        command += ["--report-api-errors", "no", "--leak-check", "no"]
    if tool == "racecheck":
        command += ["--racecheck-report", "all"]
    command += [sys.executable, os.path.abspath(__file__), "--run", name]
    start = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                              timeout=timeout)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text = f"timed out after {timeout} s\n" + (e.stdout or b"").decode(errors="replace")
        rc = None
    # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
    summary = re.findall(r"(?:ERROR SUMMARY: |RACECHECK SUMMARY: \d+ hazards? displayed \()"
                         r"(\d+) error", text)
    errors = int(summary[-1]) if summary else None
    launched = f"launched {name}" in text
    return {"kernel": name, "tool": tool, "errors": errors, "rc": rc,
            "launched": launched, "seconds": round(time.time() - start, 1),
            "clean": errors == 0 and rc == 0 and launched,
            "report": "" if errors == 0 and launched else text[-3000:]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per (kernel, tool)")
    parser.add_argument("--only", default="")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.run:
        run_one(args.run)
        return 0
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(sanitizer):
        print("compute-sanitizer not found (PATH or /usr/local/cuda/bin)")
        return 2
    all_cases = {n: c for n, c in cases().items() if args.only in n}
    pairs = [(tool, name, kernel) for name, (kernel, _, _) in all_cases.items()
             for tool in args.tools.split(",")]
    meta = {"date": datetime.date.today().isoformat(),
            "commit": os.environ.get("TILEJIT_COMMIT", "?"),
            "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                  capture_output=True, text=True).stdout.strip()
            if shutil.which("nvidia-smi") else "?",
            "sanitizer": subprocess.run([sanitizer, "--version"], capture_output=True,
                                        text=True).stdout.strip().splitlines()[-1:]}
    print(f"{len(pairs)} (kernel, tool) pairs, {args.jobs} at a time", flush=True)
    print(f"{'kernel':58s} {'tool':10s} {'errors':>6s} {'s':>6s}", flush=True)
    results = []
    # each row is printed and the JSON rewritten as it completes, so a run cut short by a
    # time limit still leaves what it measured
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(sanitize, sanitizer, *p, args.timeout) for p in pairs]
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            results.append(r)
            mark = "" if r["clean"] else "   <-- " + ("not launched" if not r["launched"]
                                                      else f"rc {r['rc']}")
            print(f"{r['kernel']:58s} {r['tool']:10s} {str(r['errors']):>6s} "
                  f"{r['seconds']:6.1f}{mark}", flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"meta": meta, "done": len(results), "of": len(pairs),
                               "rows": results}, f, indent=1)
    dirty = [r for r in results if not r["clean"]]
    for r in dirty:
        print(f"\n== {r['kernel']} under {r['tool']}\n{r['report']}")
    print(f"\n{len(results) - len(dirty)} of {len(results)} (kernel, tool) pairs clean")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())

"""Variants of the benchmark GEMM compiled under different experiment switches (environment
variables the compiler reads while a variant compiles; not part of tilejit's interface),
beside cuBLAS in one process: every variant checked against torch, then timed in
interleaved rounds (best round kept).

    GEMM_VARIANTS="name=K:V,K:V;..." python benchmarks/experiments/gemm_variants.py \\
        [--json FILE] [--sizes 4096,8192] [--dtypes float16] [--config BM,BN,BK,T,S] NAME ...

``base`` compiles with no switch. The disk cache is off (variants differ only in switches).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]
os.environ["TILEJIT_DISABLE_CACHE"] = "1"

import torch  # noqa: E402

import tilejit  # noqa: E402
from experiment_support import environment, write_results  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402

VARIANTS = {"base": {}}
for spec in os.environ.get("GEMM_VARIANTS", "").split(";"):
    if spec.strip():
        name, _, env = spec.partition("=")
        VARIANTS[name] = dict(kv.split(":", 1) for kv in env.split(",") if kv)


def option(args, flag, default):
    return args[args.index(flag) + 1] if flag in args else default


def compiled(gemm_kernel, env, a, b, c, cfg):
    kernel = tilejit.kernel(gemm_kernel.func)
    with environment(env):
        kernel(a, b, c, **cfg)      # compiles now, under the switches
        torch.cuda.synchronize()
    return kernel


def one(gemm_kernel, names, dtype, n, cfg):
    a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    fns = [("cuBLAS", lambda: torch.matmul(a, b, out=c))]
    for name in names:
        c.zero_()
        kernel = compiled(gemm_kernel, VARIANTS[name], a, b, c, cfg)
        err = (c.float() - ref).abs().max().item()
        assert err < 0.05 * (1 + ref.abs().max().item()), (name, err)
        fns.append((name, lambda kernel=kernel: kernel(a, b, c, **cfg)))
    times = interleaved_times(fns, rounds=len(fns) * 2)
    best = min(times["cuBLAS"])
    rows = []
    for name, _ in fns:
        ms = min(times[name])
        rows.append({"dtype": str(dtype), "n": n, "name": name, "ms": ms,
                     "TFLOP/s": 2 * n ** 3 / ms / 1e9, "vs cuBLAS": best / ms,
                     "env": VARIANTS.get(name, {})})
        print(f"{str(dtype):15s} {n} {name:20s} {ms:8.3f} ms {rows[-1]['TFLOP/s']:7.1f} TF "
              f"{rows[-1]['vs cuBLAS']:6.3f}", flush=True)
    return rows


def main():
    args = sys.argv[1:]
    out = option(args, "--json", None)
    sizes = [int(x) for x in option(args, "--sizes", "4096,8192").split(",")]
    dtypes = option(args, "--dtypes", "float16").split(",")
    cfg = dict(zip(("block_M", "block_N", "block_K", "threads", "num_stages"),
                   map(int, option(args, "--config", "128,128,64,128,3").split(","))))
    values = {option(args, f, None) for f in ("--json", "--sizes", "--dtypes", "--config")}
    names = [a for a in args if not a.startswith("--") and a not in values] or list(VARIANTS)
    from run import gemm_kernel
    rows = []
    for dtype in dtypes:
        for n in sizes:
            rows += one(gemm_kernel, names, getattr(torch, dtype), n, cfg)
    if out:
        write_results(out, rows, config=cfg)


if __name__ == "__main__":
    main()

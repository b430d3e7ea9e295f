"""GPU ≡ simulator, measured: the examples' kernels on random shapes (non-multiples of
their blocks included) and random data, each case run on the GPU and in the simulator
from the same inputs, every output compared.

    python benchmarks/fuzz_gpu_sim.py [--cases N] [--seed S] [--only WORD] [--json FILE]
                                      [--sim-only]

Each kernel's parameters are written over named dimensions (``DIMS``: a GEMM's A is
(M, K), B (K, N), ...); a case draws each dimension from [lo, hi] (``RANGES``), so the
shapes stay consistent and land off the block sizes. Inputs are standard normal (scaled
where a kernel sums many of them), outputs start as zeros in both runs. A case is:
``ok`` (max |gpu − sim| within the dtype's tolerance, relative to the largest |sim|),
``mismatch`` (beyond it: a bug), ``rejected`` (both runs raised the same kind of clear
error: an unsupported shape), or ``diverged`` (only one raised: a bug). The generator's
seed of every case is recorded, so each one can be replayed alone.

``--sim-only`` runs the simulator only (no GPU): what CI does to keep the generator and
the tables working (``tests/test_fuzz_harness.py``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests", "support")]

import tilejit  # noqa: E402
from ptx_examples import all_examples  # noqa: E402

# each parameter's shape over named dimensions (a scalar parameter keeps the example's
# value); kernels whose inputs carry indices (varlen's cu_seqlens) are not fuzzed: random
# indices would read out of bounds
DIMS = {
    "vector_add.vector_add": [("N",), ("N",), ("N",)],
    "vector_add.relu": [("N",), ("N",)],
    "elementwise_2d.scale_bias": [("M", "N"), ("N",), ("M", "N"), None],
    "gemm.matmul": [("M", "K"), ("K", "N"), ("M", "N")],
    "gemm_epilogue.matmul_bias_relu": [("M", "K"), ("K", "N"), ("N",), ("M", "N")],
    "softmax.softmax": [("M", "N"), ("M", "N")],
    "softmax.online_softmax": [("M", "N"), ("M", "N")],
    "norms.layer_norm": [("M", "N"), ("N",), ("N",), ("M", "N"), None],
    "norms.rms_norm": [("M", "N"), ("N",), ("M", "N"), None],
    "row_sum.row_sum": [("M", "N"), ("M",)],
    "row_sum.row_sum_partials": [("M", "N"), ("M",)],
    "splitk_gemm.splitk_gemm": [("M", "K"), ("K", "N"), ("M", "N")],
    "flash_attention.flash_attn.flashattn": [("B", "S", "H", "D")] * 4,
    "flash_attention.flash_attn_bwd.flashattn_bwd_preprocess":
        [("B", "S", "H", "D")] * 2 + [("B", "H", "S")],
}
# the range of each dimension: lo..hi (D, a head dimension the kernel is written for,
# stays the example's)
RANGES = {"N": (1, 5000), "M": (1, 300), "K": (1, 700), "B": (1, 2), "S": (1, 600),
          "H": (1, 3)}
FIXED = {"D"}
# kernels that hold a whole row in one fragment reduce it across the block: its length is
# one the reduction can lay out (a multiple of the block's threads); drawn from these
CHOICES = {name: {"N": [256, 512, 768, 1024, 2048, 3072, 4096]}
           for name in ("softmax.softmax", "norms.layer_norm", "norms.rms_norm")}
# max |gpu - sim| allowed, relative to 1 + max |sim|, by output dtype
TOLERANCE = {"float16": 2e-2, "bfloat16": 4e-2, "float32": 2e-3, "float64": 1e-9}


def cases(count: int, seed: int, only=None):
    """(kernel name, kernel, case seed, args spec, constexprs, written parameters) of
    every case: the shapes drawn, each parameter as (shape, dtype) or a scalar."""
    for name, kernel, specs, constexprs, _ in all_examples():
        dims = DIMS.get(name)
        if dims is None or (only and not any(w in name for w in only)):
            continue
        tag = f"{name}{sorted(constexprs.items())}"
        for i in range(count):
            case_seed = (seed * 1_000_003 + zlib.crc32(tag.encode()) + i) % 2 ** 32
            rng = np.random.default_rng(case_seed)
            sizes = {}
            for spec, names in zip(specs, dims):
                if names is None:
                    continue
                for d, n in zip(spec[0], names):
                    if n in FIXED:
                        sizes[n] = d
                    elif n in CHOICES.get(name, {}) and n not in sizes:
                        sizes[n] = int(rng.choice(CHOICES[name][n]))
                    elif n not in sizes:
                        lo, hi = RANGES[n]
                        sizes[n] = int(rng.integers(lo, hi + 1))
            args = [spec if names is None else (tuple(sizes[n] for n in names), spec[1])
                    for spec, names in zip(specs, dims)]
            yield name, kernel, case_seed, args, constexprs, sizes


def _inputs(args, case_seed, written, device, torch):
    rng = np.random.default_rng(case_seed + 1)
    out = []
    for k, spec in enumerate(args):
        if not isinstance(spec, tuple):
            out.append(spec)
            continue
        shape, dtype = spec
        if k in written:
            data = np.zeros(shape, np.float64)
        else:
            data = rng.standard_normal(shape)
        t = torch.from_numpy(data).to(getattr(torch, dtype))
        out.append(t.to(device) if device != "cpu" else t)
    return out


def run_case(kernel, args, constexprs, case_seed, sim_only, torch):
    params = kernel.source.params
    written = {k for k, p in enumerate(params[:len(args)]) if p in kernel.written}
    sim_kernel = tilejit.kernel(kernel.func, target="sim")
    results = {}
    for where in (("sim",) if sim_only else ("sim", "gpu")):
        values = _inputs(args, case_seed, written, "cuda" if where == "gpu" else "cpu",
                         torch)
        try:
            (sim_kernel if where == "sim" else kernel)(*values, **constexprs)
            if where == "gpu":
                torch.cuda.synchronize()
            results[where] = [values[k].double().cpu() for k in sorted(written)]
        except Exception as e:          # a rejected shape is a clear error in both runs
            results[where] = e
    if sim_only:
        r = results["sim"]
        return ({"status": "sim ok"} if not isinstance(r, Exception) else
                {"status": "rejected", "error": f"{type(r).__name__}: {str(r)[:200]}"})
    sim, gpu = results["sim"], results["gpu"]
    if isinstance(sim, Exception) or isinstance(gpu, Exception):
        if isinstance(sim, Exception) and isinstance(gpu, Exception) and \
                type(sim) is type(gpu):
            return {"status": "rejected", "error": f"{type(sim).__name__}: {str(sim)[:200]}"}
        return {"status": "diverged", "sim": repr(sim)[:300], "gpu": repr(gpu)[:300]}
    worst, bound = 0.0, 0.0
    for k, s, g in zip(sorted(written), sim, gpu):
        dtype = args[k][1]
        scale = 1.0 + float(s.abs().max()) if s.numel() else 1.0
        both_nan = s.isnan() & g.isnan()
        diff = (s - g).abs()
        diff[both_nan] = 0
        if diff.isnan().any():
            return {"status": "mismatch", "max_error": "nan", "output": k}
        err = float(diff.max()) / scale if s.numel() else 0.0
        worst = max(worst, err)
        bound = max(bound, TOLERANCE[dtype])
        if err > TOLERANCE[dtype]:
            return {"status": "mismatch", "max_error": err, "output": k}
    return {"status": "ok", "max_error": worst, "tolerance": bound}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", nargs="*")
    p.add_argument("--json")
    p.add_argument("--sim-only", action="store_true")
    a = p.parse_args(argv)
    import torch
    if not a.sim_only and not torch.cuda.is_available():
        p.error("no CUDA device: run with --sim-only")
    rows, counts = [], {}
    for name, kernel, case_seed, args, constexprs, sizes in cases(a.cases, a.seed, a.only):
        r = run_case(kernel, args, constexprs, case_seed, a.sim_only, torch)
        r.update(kernel=name, constexprs=constexprs, seed=case_seed, sizes=sizes)
        rows.append(r)
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"{r['status']:9s} {name} {constexprs or ''} {sizes} seed={case_seed}"
              + (f" max_error={r['max_error']:.2e}" if isinstance(r.get("max_error"), float)
                 else "") + (f" ({r.get('error', '')[:100]})" if "error" in r else ""),
              flush=True)
    print("totals:", counts)
    if a.json:
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
        with open(a.json, "w") as f:
            json.dump({"meta": {"date": datetime.date.today().isoformat(), "gpu": gpu,
                                "commit": os.environ.get("TILEJIT_COMMIT", "?"),
                                "seed": a.seed, "cases per kernel": a.cases,
                                "sim only": a.sim_only},
                       "totals": counts, "cases": rows}, f, indent=1)
    bad = counts.get("mismatch", 0) + counts.get("diverged", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

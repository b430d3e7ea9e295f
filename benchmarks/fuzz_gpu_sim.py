"""GPU ≡ simulator ≡ torch, measured: every example kernel and every seed program
(tests/programs/) on random shapes (non-multiples of the blocks included), random dtypes
and random configurations, each case run on the GPU and in the simulator from the same
inputs and every output compared with the simulator's AND with a float64 torch reference.

    python benchmarks/fuzz_gpu_sim.py [--cases N] [--seed S] [--only WORD ...] [--json FILE]
                                      [--jobs J] [--sim-only] [--small]
                                      [--replay KERNEL:SEED ...]

The GPU run: ``python benchmarks/fuzz_gpu_sim.py --seed 7 --json FILE``. Its defaults, 20
cases of each of the 38 kernels (741 cases: the fixed-shape seed004 GEMM runs once) over 8
worker processes sharing the GPU, took 61 s on an H200 with a cold compile cache
(2026-12-02, ``--seed 11``: 741 of 741 ok); keep a run under ~150 s there (``--cases 40``,
by extrapolation, is about the most). The compiles and the simulator dominate, so the
shapes stay small (a few hundred rows, attention up to 300 keys); ``--jobs`` spreads the
cases over processes.
``--sim-only`` (no GPU) compares the simulator with the references; with ``--small``
(every range a quarter) that is what CI runs (``tests/test_fuzz_harness.py``).

A case is drawn from its own seed (recorded, so ``--replay KERNEL:SEED`` runs it alone):
first the dtype (of the kernel's supported ones), then a configuration (constexprs: block
sizes, threads, stages, causal, layout, ... from the kernel's valid set, which is the
values its own tests and examples run; a configuration may fix a dimension the kernel
holds in registers whole), then a variant (what is not a constexpr: an optional output, a
transposed input, the seed's own calling style), then each named dimension from its range
(``_targets``). Inputs are standard normal (torch generator seeded with the case seed + 1),
outputs start as zeros in both runs. Errors are max |x − y| / (1 + max |y|) over each
output, y the simulator's or the reference's; the limit is the case dtype's (``TOLERANCE``:
one table). A case is ``ok`` (every comparison within it), ``mismatch`` (one beyond it:
a bug), ``rejected`` (both runs raised the same kind of error), ``diverged`` (only one
raised: a bug) or ``skipped`` (the GPU lacks what the kernel needs: float8 tensor cores
before sm_89, clusters and TMA before sm_90). The JSON has every case (kernel, seed,
sizes, dtype, config, variant, errors, status) and per kernel the cases tried and the
counts of each status. The exit status is 1 when a case mismatched or diverged.

Not fuzzed (``EXCLUDED``): the seed listings that are wrong as written (the simulator
reports them: tests/tilelang/) and the one tilejit does not compile.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHS = [ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests", "support"),
         os.path.join(ROOT, "tests", "programs")]
sys.path[:0] = [p for p in PATHS if p not in sys.path]

from fuzz_targets import (EXCLUDED, TOLERANCE, Target, _d,  # noqa: E402
                          _torch, targets)


# ------------------------------------------------------------------------ the cases

def case_seed(seed: int, name: str, i: int) -> int:
    return (seed * 1_000_003 + zlib.crc32(name.encode()) + i) % 2 ** 32


def draw(target: Target, seed: int, small: bool = False) -> dict:
    """The case of ``seed``: dtype, config, variant and sizes, drawn in that order."""
    rng = np.random.default_rng(seed)
    dtype = target.dtypes[int(rng.integers(len(target.dtypes)))]
    configs = target.configs[dtype] if isinstance(target.configs, dict) else target.configs
    config = dict(configs[int(rng.integers(len(configs)))])
    variant = dict(target.variants[int(rng.integers(len(target.variants)))])
    sizes = {}
    for name, spec in target.dims.items():
        if name in config:
            sizes[name] = config.pop(name)
        elif isinstance(spec, list):
            sizes[name] = int(spec[int(rng.integers(len(spec)))])
        else:
            lo, hi, step = (*spec, 1)[:3]
            if small:
                hi = max(lo, lo + (hi - lo) // 4 // step * step)
            sizes[name] = lo + step * int(rng.integers((hi - lo) // step + 1))
    if target.more is not None:
        sizes.update(target.more(rng, sizes, small))
    return {"kernel": target.name, "source": target.source, "seed": seed, "dtype": dtype,
            "config": config, "variant": variant, "sizes": sizes}


def cases(count: int, seed: int, only=None, small: bool = False):
    """Every case of a run: ``count`` per kernel (fewer where a kernel has fixed shapes),
    each drawn from its own seed."""
    out = []
    for name, target in targets().items():
        if only and not any(w in name for w in only):
            continue
        for i in range(min(count, target.max_cases or count)):
            out.append(draw(target, case_seed(seed, name, i), small))
    return out


# ------------------------------------------------------------------------ comparing

def max_error(x, y) -> float:
    """max |x - y| / (1 + max |y|): NaN in both, or equal infinities, count as equal; a
    NaN in one only, or another shape, is an infinite error."""
    x, y = _d(x), _d(y)
    if x.shape != y.shape:
        return math.inf
    if not x.numel():
        return 0.0
    diff = (x - y).abs()
    diff[(x.isnan() & y.isnan()) | (x == y)] = 0
    if diff.isnan().any():
        return math.inf
    finite = y[y.isfinite()]
    return float(diff.max()) / (1 + (float(finite.abs().max()) if finite.numel() else 0.0))


def _worst(xs, ys) -> float:
    if len(xs) != len(ys):
        return math.inf
    return max((max_error(x, y) for x, y in zip(xs, ys)), default=0.0)


def _on(x: dict, device: str) -> dict:
    """Copies of the case's tensors on ``device`` (the host inputs stay untouched)."""
    torch = _torch()
    return {k: (v.to(device) if device != "cpu" else v.clone()) if isinstance(v, torch.Tensor)
            else v for k, v in x.items()}


def _outcome(target, x, case, device):
    """(outputs on the host, None) or (None, the exception)."""
    torch = _torch()
    try:
        out = target.run(_on(x, device), case["config"], case["variant"])
        if device != "cpu":
            torch.cuda.synchronize()
        return [o.detach().cpu() for o in out], None
    except Exception as e:              # noqa: BLE001 - every failure is recorded
        return None, e


def _json_float(v):
    return v if v is None or math.isfinite(v) else "inf"


def run_case(case: dict, sim_only: bool, capability=None) -> dict:
    """Run one case (as ``draw`` made it) and return its record."""
    torch = _torch()
    target = targets()[case["kernel"]]
    row = dict(case)
    if not sim_only and target.needs and capability is not None \
            and tuple(capability) < target.needs:
        row.update(status="skipped", why=f"needs sm_{target.needs[0]}{target.needs[1]}")
        return row
    start = time.perf_counter()
    g = torch.Generator().manual_seed(case["seed"] + 1)
    x = target.make(case["sizes"], case["dtype"], case["config"], case["variant"], g)
    sim, sim_error = _outcome(target, x, case, "cpu")
    gpu, gpu_error = (None, None) if sim_only else _outcome(target, x, case, "cuda")
    row["time_s"] = round(time.perf_counter() - start, 2)
    errors = [e for e in (sim_error, gpu_error) if e is not None]
    if errors:
        if sim_only or (sim_error is not None and gpu_error is not None
                        and type(sim_error) is type(gpu_error)):
            e = errors[0]
            row.update(status="rejected", error=f"{type(e).__name__}: {str(e)[:300]}")
        else:
            row.update(status="diverged", sim=repr(sim_error)[:300] if sim_error else "ran",
                       gpu=repr(gpu_error)[:300] if gpu_error else "ran")
        return row
    limit = (target.tolerance(x, case["sizes"], sim) if target.tolerance
             else TOLERANCE[case["dtype"]])
    ref = target.reference(x, case["sizes"], case["dtype"], case["config"], case["variant"])
    found = {"sim_vs_ref": _worst(sim, ref) if ref is not None else None}
    if not sim_only:
        found["gpu_vs_sim"] = _worst(gpu, sim)
        found["gpu_vs_ref"] = _worst(gpu, ref) if ref is not None else None
    bad = [k for k, v in found.items() if v is not None and not v <= limit]
    row.update(status="mismatch" if bad else "ok", tolerance=limit,
               errors={k: _json_float(v) for k, v in found.items()})
    if bad:
        row["beyond"] = bad
    return row


def _line(row) -> str:
    errs = " ".join(f"{k}={v:.1e}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in row.get("errors", {}).items())
    extra = row.get("error") or row.get("why") or (
        f"sim: {row['sim']} gpu: {row['gpu']}" if row["status"] == "diverged" else "")
    return (f"{row['status']:8s} {row['kernel']} {row['dtype']} {row['config'] or ''}"
            f"{row['variant'] or ''} {row['sizes']} seed={row['seed']} {errs}"
            f"{' (' + extra[:160] + ')' if extra else ''}")


def _run_chunk(args):
    """A worker's share (one case): the record, printed as it is made."""
    case, sim_only, capability = args
    row = run_case(case, sim_only, capability)
    print(_line(row), flush=True)
    return row


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _worker_init():
    sys.path[:0] = [p for p in PATHS if p not in sys.path]
    _torch().set_num_threads(1)


STATUSES = ("ok", "mismatch", "diverged", "rejected", "skipped")


def summary(rows) -> dict:
    """Per kernel: its source, the cases tried (not skipped) and each status's count."""
    out = {}
    for row in rows:
        k = out.setdefault(row["kernel"], dict({"source": row["source"], "tried": 0},
                                               **dict.fromkeys(STATUSES, 0)))
        k[row["status"]] += 1
        k["tried"] += row["status"] != "skipped"
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=20, help="cases per kernel (default 20)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--only", nargs="*", help="kernels whose name contains one of these")
    p.add_argument("--replay", nargs="*", metavar="KERNEL:SEED",
                   help="run these cases alone (a record's kernel and seed)")
    p.add_argument("--json")
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                   help="worker processes (default min(8, CPUs)); 1 runs in this process")
    p.add_argument("--sim-only", action="store_true",
                   help="no GPU: the simulator against the references")
    p.add_argument("--small", action="store_true", help="every range a quarter (CI)")
    a = p.parse_args(argv)
    torch = _torch()
    if not a.sim_only and not torch.cuda.is_available():
        p.error("no CUDA device: run with --sim-only")
    capability = None if a.sim_only else torch.cuda.get_device_capability()
    if a.replay:
        todo = []
        for spec in a.replay:
            name, _, s = spec.rpartition(":")
            if name not in targets():
                p.error(f"--replay: no kernel {name!r}")
            todo.append(draw(targets()[name], int(s), a.small))
    else:
        todo = cases(a.cases, a.seed, a.only, a.small)
    start = time.perf_counter()
    jobs = max(1, min(a.jobs, len(todo)))
    if jobs == 1:
        rows = [_run_chunk((c, a.sim_only, capability)) for c in todo]
    else:
        import concurrent.futures
        import multiprocessing
        for var in THREAD_VARIABLES:         # the workers share the CPUs: one thread each
            os.environ.setdefault(var, "1")
        # the longest cases first, so that no worker is left with them at the end
        order = sorted(range(len(todo)), key=lambda i: -targets()[todo[i]["kernel"]].cost)
        with concurrent.futures.ProcessPoolExecutor(
                jobs, mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init) as pool:
            done = list(pool.map(_run_chunk, [(todo[i], a.sim_only, capability)
                                              for i in order]))
        rows = [None] * len(todo)
        for i, row in zip(order, done):
            rows[i] = row
    wall = time.perf_counter() - start
    per_kernel = summary(rows)
    totals = {}
    for row in rows:
        totals[row["status"]] = totals.get(row["status"], 0) + 1
    print(f"totals: {totals} ({len(per_kernel)} kernels, {wall:.0f} s)")
    if a.json:
        gpu = torch.cuda.get_device_name() if not a.sim_only else "none (simulator only)"
        with open(a.json, "w") as f:
            json.dump({"meta": {"date": datetime.date.today().isoformat(), "gpu": gpu,
                                "capability": capability,
                                "commit": os.environ.get("TILEJIT_COMMIT", "?"),
                                "seed": a.seed, "cases per kernel": a.cases,
                                "sim only": a.sim_only, "small": a.small, "jobs": jobs,
                                "wall_s": round(wall, 1), "torch": torch.__version__,
                                "error": "max|x - y| / (1 + max|y|), y the simulator's "
                                         "or the float64 reference's",
                                "tolerance": TOLERANCE, "excluded": EXCLUDED},
                       "kernels": len(per_kernel),
                       "cases tried": sum(k["tried"] for k in per_kernel.values()),
                       "totals": totals,
                       "per_kernel": per_kernel, "cases": rows}, f, indent=1)
    bad = totals.get("mismatch", 0) + totals.get("diverged", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a cold compile's time goes, stage by stage (issue 24, item 2).

    python benchmarks/profile_compile.py [KERNEL ...] [--runs N] [--arch sm_90a] [--cpu]
                                         [--cprofile DIR] [--json FILE]

Each run of each kernel is a fresh Python process with the disk cache off
(``TILEJIT_DISABLE_CACHE=1``) that compiles the kernel once with
``kernel.compile(..., target="cuda", arch=...)`` on numpy arguments (no GPU needed) and
reports the time of each stage; the table gives the best (minimum) of the runs per stage
and of the total. The kernels:

    gemm     examples/gemm_epilogue.py: 128x128x32 GEMM + bias + ReLU, 128 threads, 2 stages
    attn     examples/flash_attention/flash_attn.py: FlashAttention 128x64, 128 threads,
             2 stages, non-causal, d 128
    gemm_ws  benchmarks/run.py's gemm_kernel 128x256x64 t256 s3 (on sm_90a: wgmma and
             warp specialization)

The stages: ``import tilejit`` (and the kernel's module, torch imported before the
clock), ``import compiler`` (Numba, llvmlite and codegen/, loaded on the first compile),
``frontend`` (device_tree and materialize, less the passes), each source pass, each of
Numba's passes (``numba:<pass>``, from Numba's own pass timings), ``entry``
(nvptx.build_entry), ``parse+link`` (the lowered modules' text parsed by LLVM and
linked), ``link: verify, linkage``, ``O3``, ``ptx`` (the NVPTX target machine), and
``other``: the rest of ``compile`` (the arguments and the specialization, the lowered
modules' str()). Then the cyclic garbage collector's collections during the compile, per
generation (their time is inside the stages above), ``compile (total)`` and ``cold``
(the two imports and the compile).

Python's bytecode is cached as an installed package has it (this machine sets
PYTHONDONTWRITEBYTECODE, with which every module of tilejit is compiled from source at
each import): the children write it to a directory in the temp dir, after one uncounted
run of each kernel (``--no-bytecode-cache``: the environment as it is). ``--cpu``
reports the process's CPU time instead of wall time, steadier where other work shares
the cores. ``--cprofile DIR`` also writes a cProfile of each kernel's compile (the last
run) to DIR/<kernel>.prof. ``--json FILE`` writes every run's stages.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = ("gemm", "attn", "gemm_ws")


def _child(kernel: str, arch: str, cprofile: str | None, cpu: bool = False) -> dict:
    """Runs in the fresh process: compile ``kernel`` once, return {stage: seconds}."""
    os.environ["TILEJIT_DISABLE_CACHE"] = "1"
    for sub in ("examples", os.path.join("examples", "flash_attention"), "benchmarks"):
        sys.path.insert(0, os.path.join(ROOT, sub))
    import numpy as np
    import torch  # noqa: F401  (the examples import it; not tilejit's time)
    times: dict[str, float] = {}
    clock = time.process_time if cpu else time.perf_counter

    t0 = clock()
    import tilejit  # noqa: F401
    if kernel == "gemm":
        from gemm_epilogue import matmul_bias_relu as fn
        a = np.zeros((1024, 1024), np.float16)
        args = (a, a, np.zeros(1024, np.float32), a.copy())
        kwargs = dict(block_M=128, block_N=128, block_K=32)
    elif kernel == "attn":
        from flash_attn import flashattn as fn
        q = np.zeros((1, 1024, 8, 128), np.float16)
        args = (q, q, q, q.copy())
        kwargs = dict(block_M=128, block_N=64, threads=128, num_stages=2)
    elif kernel == "gemm_ws":
        import run
        fn = run.gemm_kernel
        a = np.zeros((1024, 1024), np.float16)
        args = (a, a, a.copy())
        kwargs = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3)
    else:
        raise SystemExit(f"unknown kernel {kernel!r}; one of {', '.join(KERNELS)}")
    times["import tilejit"] = clock() - t0

    t0 = clock()
    import llvmlite.binding as ll
    from llvmlite.binding import newpassmanagers
    from tilejit.compiler import pipeline
    from tilejit.codegen import nvptx
    times["import compiler"] = clock() - t0

    def add(stage, dt):
        times[stage] = times.get(stage, 0.0) + dt

    def timed(stage, f):
        def wrapper(*a, **k):
            t = clock()
            try:
                return f(*a, **k)
            finally:
                add(stage, clock() - t)
        wrapper.__name__ = getattr(f, "__name__", stage)
        return wrapper

    passes_total = [0.0]

    def timed_pass(p):
        def wrapper(*a, **k):
            t = clock()
            try:
                return p(*a, **k)
            finally:
                dt = clock() - t
                passes_total[0] += dt
                add(f"pass {p.__name__}", dt)
        wrapper.__name__ = p.__name__
        return wrapper

    pipeline.SOURCE_PASSES = tuple(timed_pass(p) for p in pipeline.SOURCE_PASSES)
    pipeline.build_device_function = timed("frontend", pipeline.build_device_function)
    cres_box = []
    type_and_lower = pipeline.type_and_lower

    def type_and_lower_timed(*a, **k):
        t = clock()
        cres = type_and_lower(*a, **k)
        add("numba", clock() - t)
        cres_box.append(cres)
        return cres
    pipeline.type_and_lower = type_and_lower_timed
    nvptx.build_entry = timed("entry", nvptx.build_entry)
    nvptx.link_and_optimize = timed("link_and_optimize", nvptx.link_and_optimize)
    nvptx.emit_ptx = timed("ptx", nvptx.emit_ptx)
    ll.parse_assembly = timed("parse+link", ll.parse_assembly)
    ll.ModuleRef.link_in = timed("parse+link", ll.ModuleRef.link_in)
    newpassmanagers.ModulePassManager.run = timed("O3", newpassmanagers.ModulePassManager.run)

    import gc
    collections = {}        # generation: [count, seconds] of the collections in compile
    gc_start = [0.0, False]

    def on_gc(phase, info):
        if not gc_start[1]:
            return
        if phase == "start":
            gc_start[0] = clock()
        else:
            entry = collections.setdefault(info["generation"], [0, 0.0])
            entry[0] += 1
            entry[1] += clock() - gc_start[0]
    gc.callbacks.append(on_gc)

    profiler = None
    if cprofile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    t0 = clock()
    gc_start[1] = True
    handle = fn.compile(*args, target="cuda", arch=arch, **kwargs)
    gc_start[1] = False
    times["compile"] = clock() - t0
    if profiler is not None:
        profiler.disable()
        os.makedirs(cprofile, exist_ok=True)
        profiler.dump_stats(os.path.join(cprofile, f"{kernel}.prof"))

    # the frontend less its passes; Numba by its passes; link_and_optimize's rest
    times["frontend"] -= passes_total[0]
    numba_passes = 0.0
    for cres in cres_box:
        for name, pt in cres.metadata["pipeline_times"]["nopython"].items():
            dt = pt.init + pt.run + pt.finalize
            numba_passes += dt
            label = name.split("_", 1)[1] if name[:1].isdigit() else name
            add(f"numba:{label}", dt)
    times["numba:(outside passes)"] = times.pop("numba") - numba_passes
    lo = times.pop("link_and_optimize")
    times["link: verify, linkage"] = lo - times.get("parse+link", 0.0) - times.get("O3", 0.0)
    inner = sum(v for k, v in times.items()
                if k not in ("compile", "import tilejit", "import compiler"))
    times["other"] = times["compile"] - inner
    times["ptx bytes"] = len(handle.ptx)
    for generation in range(3):    # inside the stages above, not one of them
        count, seconds = collections.get(generation, (0, 0.0))
        times[f"(gc gen {generation}: count)"] = count
        times[f"(gc gen {generation}: time)"] = seconds
    return times


def _run_child(kernel: str, arch: str, cprofile: str | None, cpu: bool,
               pycache: str | None) -> dict:
    env = dict(os.environ, TILEJIT_DISABLE_CACHE="1", PYTHONPATH=ROOT)
    if pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kernel, "--arch", arch]
    if cpu:
        cmd.append("--cpu")
    if cprofile:
        cmd += ["--cprofile", cprofile]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--cprofile", metavar="DIR")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--cpu", action="store_true",
                        help="the process's CPU time instead of wall time (steadier where "
                             "other work shares the cores)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run the children in this environment as it is (where "
                             "PYTHONDONTWRITEBYTECODE is set, every module of tilejit is "
                             "compiled from source at each import)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.arch, args.cprofile, args.cpu)))
        return
    # Python's bytecode as an installed package has it: written once, to a directory of
    # its own (not the tree), by one run of each kernel that is not counted
    pycache = None
    if not args.no_bytecode_cache:
        import tempfile
        pycache = os.path.join(tempfile.gettempdir(), "tilejit-profile-compile-pycache")
    report = {}
    for kernel in args.kernels:
        if pycache:
            _run_child(kernel, args.arch, None, args.cpu, pycache)
        runs = [_run_child(kernel, args.arch, args.cprofile if i == args.runs - 1 else None,
                           args.cpu, pycache) for i in range(args.runs)]
        stages = list(runs[0])
        best = {s: min(r.get(s, 0.0) for r in runs) for s in stages}
        report[kernel] = {"best": best, "runs": runs}
        print(f"\n{kernel} ({args.arch}), best of {args.runs} fresh processes, ms "
              f"({'CPU' if args.cpu else 'wall'} time):")
        for s in stages:
            if s in ("compile", "ptx bytes"):
                continue
            scale = 1 if s.endswith("count)") else 1e3
            cells = " ".join(f"{r.get(s, 0.0) * scale:8.1f}" for r in runs)
            print(f"  {s:42s} {best[s] * scale:8.1f}   ({cells})")
        totals = " ".join(f"{r['compile'] * 1e3:8.1f}" for r in runs)
        print(f"  {'compile (total)':42s} {best['compile'] * 1e3:8.1f}   ({totals})")
        for r in runs:
            r["cold"] = r["import tilejit"] + r["import compiler"] + r["compile"]
        best["cold"] = min(r["cold"] for r in runs)
        colds = " ".join(f"{r['cold'] * 1e3:8.1f}" for r in runs)
        print(f"  {'cold: imports + compile':42s} {best['cold'] * 1e3:8.1f}   ({colds})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

"""The md5 of the PTX of every example kernel, the benchmark kernels and the seed
programs, for sm_80 and sm_90a: `python benchmarks/ptx_fingerprints.py > before.txt`,
change the compiler, run it again and `diff` the two. A refactoring that claims to
leave code generation alone must leave this output byte-identical.

Runs without a GPU. The disk cache is bypassed (every kernel is compiled). The seed
programs are run in simulation, and each kernel the simulator compiles is also
compiled for both arches (the one hook into the compiler, `_compile_hook`)."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import sys
import contextlib

os.environ["TILEJIT_DISABLE_CACHE"] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("", "examples", os.path.join("tests", "support"), os.path.join("tests", "programs"),
            os.path.join("tests", "tilelang"), os.path.join("examples", "flash_attention"),
            "benchmarks"):
    sys.path.insert(0, os.path.join(ROOT, sub))

import numpy as np  # noqa: E402

ARCHS = ("sm_80", "sm_90a")
LINES: list[str] = []


def record(name: str, arch: str, ptx: str) -> None:
    LINES.append(f"{name:70s} {arch:7s} {hashlib.md5(ptx.encode()).hexdigest()}")


def examples():
    from ptx_examples import all_examples, example_arguments
    for name, kernel, specs, constexprs, _ in all_examples():
        for arch in ARCHS:
            ptx = kernel.compile(*example_arguments(specs), target="cuda", arch=arch,
                                 **constexprs).ptx
            record(f"example {name}", arch, ptx)


def benchmark_kernels():
    import run
    from flash_attn import flashattn
    import tilejit
    for dtype in ("float16", "bfloat16"):
        import torch
        a = torch.zeros(512, 512, dtype=getattr(torch, dtype))
        for cfg in run.GEMM_CONFIGS:
            for arch in ARCHS:
                try:
                    ptx = run.gemm_kernel.compile(a, a, a, target="cuda", arch=arch, **cfg).ptx
                except tilejit.errors.CompileError as e:   # too large for the arch
                    ptx = f"CompileError: {e.args[0]}"
                label = "x".join(str(cfg[k]) for k in ("block_M", "block_N", "block_K",
                                                       "threads", "num_stages"))
                record(f"bench gemm {dtype} {label}", arch, ptx)
    x = np.zeros(1 << 16, np.float32)
    for arch in ARCHS:
        record("bench add_unguarded", arch,
               run.add_unguarded.compile(x, x, x, target="cuda", arch=arch).ptx)
    q = np.zeros((1, 512, 2, 128), np.float16)
    fast = tilejit.kernel(flashattn.func, fast_math=True)
    for cfg in run.ATTENTION_CONFIGS:
        cfg = dict(cfg)
        kernel = fast if cfg.pop("fast_math") else flashattn
        for causal in (False, True):
            for arch in ARCHS:
                ptx = kernel.compile(q, q, q, q, target="cuda", arch=arch, is_causal=causal,
                                     **cfg).ptx
                label = "x".join(str(v) for v in cfg.values())
                record(f"bench flashattn {label} fast={kernel is fast} causal={causal}",
                       arch, ptx)


@contextlib.contextmanager
def _compile_hook(prefix):
    """Each simulated compile also compiled for ARCHS, its PTX recorded."""
    import importlib
    where = importlib.import_module("tilejit.compiler")
    if not hasattr(where, "compile_kernel"):       # the tree after the house plan
        where = importlib.import_module("tilejit.compiler.pipeline")
    original = where.compile_kernel
    seen = set()

    def hooked(ks, spec, *args, **kwargs):
        out = original(ks, spec, *args, **kwargs)
        key = (ks.tree.name, spec)
        if _is_sim(spec) and key not in seen:
            seen.add(key)
            for arch in ARCHS:
                record(f"{prefix} {ks.tree.name} #{len(seen)}", arch,
                       original(ks, _with_arch(spec, arch), *args, **kwargs).ptx)
        return out

    where.compile_kernel = hooked
    try:
        yield
    finally:
        where.compile_kernel = original


def _is_sim(spec):
    target = getattr(spec, "target", None)
    return (target.kind == "sim") if target is not None else spec.arch == "sim"


def _with_arch(spec, arch):
    if hasattr(spec, "target"):
        from tilejit.target import Target
        return dataclasses.replace(spec, target=Target.cuda(arch))
    return dataclasses.replace(spec, arch=arch)


def seed_programs():
    import test_seed_programs as seeds
    for name in sorted(seeds.PROGRAMS):
        with _compile_hook(f"seed {name}"), contextlib.redirect_stdout(io.StringIO()):
            seeds.PROGRAMS[name](gpu=False)


def main():
    examples()
    benchmark_kernels()
    seed_programs()
    print("\n".join(LINES))
    print(f"# {len(LINES)} PTX modules, "
          f"{len({line.split()[-1] for line in LINES})} distinct", file=sys.stderr)


if __name__ == "__main__":
    main()

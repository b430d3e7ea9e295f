"""The GEMM with its PTX reordered by hand, beside the compiled one and cuBLAS, to time an
instruction order before building it into the compiler.

    python benchmarks/experiments/gemm_ptx_order.py [N] [--json FILE]
    python benchmarks/experiments/gemm_ptx_order.py --check     # no GPU: the edit, ptxas

The edit ("ldmatrix first"): in the pipelined loop, the first k-step's ldmatrix (and the
address arithmetic right before them) move from after the refill to right after the
loop's ``bar.sync``, so they are not queued behind the refill's cp.async (ncu, seventh
session: the first LDSMs wait for the LDGSTS whose registers they reuse). Both kernels
are checked against torch, then timed in rotated interleaved rounds (128x128x64, 128
threads, 3 stages, fp16, 4096^3 by default).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]
os.environ.setdefault("TILEJIT_DISABLE_CACHE", "1")

import tilejit  # noqa: E402
import tilejit.artifacts as artifacts  # noqa: E402

CONFIG = dict(block_M=128, block_N=128, block_K=64, threads=128, num_stages=3)


def ldmatrix_first(ptx: str) -> str:
    """Moves the block from the first instruction after the steady loop's
    ``cp.async.commit_group`` to its 8th ldmatrix up to right after the loop's
    ``bar.sync``. Refuses (ValueError) when a register the block reads is written
    between the barrier and the block."""
    lines = ptx.split("\n")
    waits = [i for i, line in enumerate(lines) if "cp.async.wait_group" in line
             and "wait_group \t0" not in line and "wait_group 0" not in line]
    if not waits:
        raise ValueError("no steady-state cp.async.wait_group")
    bar = next(i for i in range(waits[-1], len(lines)) if "bar.sync" in lines[i])

    def feeds_ldmatrix(i):      # the commit that the loop's compute follows (LLVM may lay
        for line in lines[i + 1:i + 40]:    # that block out before the barrier's)
            if "ldmatrix" in line:
                return True
            if "mma.sync" in line or re.match(r"\s*\$L__", line):
                return False
        return False
    commit = next(i for i, line in enumerate(lines)
                  if "cp.async.commit_group" in line and feeds_ldmatrix(i))
    first = commit + 1
    while lines[first].strip().startswith("add.s64") or lines[first].strip().startswith("$"):
        first += 1          # the loop counter's increment stays where it is
    count, last = 0, first
    for last in range(first, len(lines)):
        if "ldmatrix" in lines[last]:
            count += 1
            if count == 8:
                break
        if "mma.sync" in lines[last] or re.match(r"\s*\$L__", lines[last]):
            raise ValueError("fewer than 8 ldmatrix before the first mma")
    block = lines[first:last + 1]
    # in execution order the block follows the barrier, the refill and the commit; none
    # of the registers it reads may be written on that way (the barrier's block up to
    # its branch, the refill blocks, the commit's block before it)
    between = lines[bar + 1:] if first < bar else lines[bar + 1:first]
    reads = set(re.findall(r"%r[a-z]*\d+", "\n".join(block)))
    defined = set()
    for line in block:
        m = re.match(r"^\s*(?:@!?%p\d+\s+)?[\w.]+\s+(%r[a-z]*\d+)", line)
        if m:
            defined.add(m.group(1))
    outside = reads - defined
    refill = [line for line in between if "cp.async" in line or "%rd" in line or "%r" in line]
    written = {m for line in refill
               for m in re.findall(r"^\s*(?:@!?%p\d+\s+)?[\w.]+\s+(%r[a-z]*\d+)", line)}
    clash = outside & written
    if clash:
        raise ValueError(f"registers the block reads are written after the barrier: {clash}")
    rest = lines[:first] + lines[last + 1:]
    at = rest.index(lines[bar]) if first > bar else bar - len(block)
    return "\n".join(rest[:at + 1] + block + rest[at + 1:])


def reordered_kernel(base):
    """A copy of ``base`` whose compiled PTX goes through ldmatrix_first."""
    kernel = tilejit.kernel(base.func)
    original = artifacts.load_or_compile

    def load_or_compile(k, spec):
        compiled = original(k, spec)
        if k is kernel and spec.arch != "sim":
            compiled.ptx = ldmatrix_first(compiled.ptx)
        return compiled
    artifacts.load_or_compile = load_or_compile
    return kernel


def check():
    import numpy as np
    from run import gemm_kernel
    a = np.zeros((4096, 4096), np.float16)
    ptx = gemm_kernel.compile(a, a, a, target="cuda", arch="sm_90a", **CONFIG).ptx
    for name, text in (("compiled", ptx), ("ldmatrix first", ldmatrix_first(ptx))):
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                           capture_output=True, text=True)
        print(name, [line.split("info    : ")[-1] for line in r.stderr.splitlines()
                     if "Used" in line or "spill" in line])


def main():
    args = sys.argv[1:]
    if "--check" in args:
        return check()
    out = args[args.index("--json") + 1] if "--json" in args else None
    n = int(next((a for a in args if a.isdigit()), 4096))
    import torch
    from run import gemm_kernel
    from tilejit.testing_support import interleaved_times
    moved = reordered_kernel(gemm_kernel)
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = a @ b
    fns = [("cuBLAS", lambda: torch.matmul(a, b, out=c)),
           ("compiled", lambda: gemm_kernel(a, b, c, **CONFIG)),
           ("ldmatrix first", lambda: moved(a, b, c, **CONFIG))]
    for name, fn in fns[1:]:
        c.zero_()
        fn()
        err = (c.float() - ref.float()).abs().max().item()
        assert err < 0.05 * (1 + ref.float().abs().max().item()), f"{name}: error {err}"
    times = interleaved_times(fns, rounds=5)
    rows = []
    for name, _ in fns:
        ms = min(times[name])
        rows.append({"name": name, "ms": ms, "TFLOP/s": 2 * n ** 3 / ms / 1e9,
                     "vs cuBLAS": min(times["cuBLAS"]) / ms})
        print(f"{name:16s} {ms:8.3f} ms {rows[-1]['TFLOP/s']:7.1f} TF "
              f"{rows[-1]['vs cuBLAS']:6.3f} of cuBLAS")
    if out:
        json.dump({"meta": {"commit": os.environ.get("TILEJIT_COMMIT", "?"), "n": n,
                            "config": CONFIG, "gpu": torch.cuda.get_device_name()},
                   "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()

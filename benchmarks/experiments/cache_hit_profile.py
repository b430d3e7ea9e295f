"""Where a disk-cache hit's first launch goes (issue 24: <= 50 ms from `import tilejit`).

    python benchmarks/experiments/cache_hit_profile.py [OUT_DIR]

A child process compiles examples/vector_add.py's kernel into an empty disk cache and
launches it; a second child, with torch imported and CUDA initialized before the clock,
imports tilejit and makes the first call under cProfile; the top of its profile is
printed and written to OUT_DIR/cache_hit.prof."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = r"""
import cProfile, os, pstats, sys, time
import torch
a = torch.randn(1 << 20, device="cuda"); c = torch.empty_like(a); torch.cuda.synchronize()
sys.path.insert(0, os.path.join(os.environ["ROOT"], "examples"))
profile = cProfile.Profile() if os.environ.get("PROFILE") else None
t0 = time.perf_counter()
if profile: profile.enable()
import tilejit
from vector_add import vector_add
t1 = time.perf_counter()
vector_add(a, a, c)
torch.cuda.synchronize()
t2 = time.perf_counter()
if profile:
    profile.disable()
    profile.dump_stats(os.environ["PROFILE"])
    pstats.Stats(os.environ["PROFILE"]).sort_stats("cumulative").print_stats(40)
print(f"import {1e3 * (t1 - t0):.1f} ms, first call {1e3 * (t2 - t1):.1f} ms")
"""


def main(out=None):
    out = out or tempfile.mkdtemp()
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, ROOT=ROOT, PYTHONPATH=ROOT, TILEJIT_CACHE_DIR=cache,
                   PYTHONPYCACHEPREFIX=os.path.join(cache, "pycache"))
        for label, extra in (("cold", {}), ("warm", {}), ("warm", {}),
                             ("warm, profiled", {"PROFILE": os.path.join(out, "cache_hit.prof")})):
            r = subprocess.run([sys.executable, "-c", CHILD], env=dict(env, **extra),
                               capture_output=True, text=True)
            print(f"== {label}: {r.stdout.strip().splitlines()[-1] if r.stdout else r.stderr}")
            if "PROFILE" in extra:
                print(r.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])

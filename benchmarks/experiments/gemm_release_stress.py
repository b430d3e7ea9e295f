"""Repeated checks of the benchmark GEMM against cuBLAS (max |error| per launch), for a
race that shows in some launches only:

    python benchmarks/experiments/gemm_release_stress.py [REPEATS]

The race it was written for is the empty-mbarrier release experiment, which is not in
the product: ``benchmarks/experiments/tma_release.patch`` applied to a checkout of
commit 4c0cfa2 adds it (``TJX_TMA_RELEASE=1``, ``TJX_RELEASE_FENCE``); run this script
there with ``TJX_TMA_RELEASE=1``.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]
os.environ["TILEJIT_DISABLE_CACHE"] = "1"

from run import gemm_kernel  # noqa: E402

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
for dtype in (torch.bfloat16, torch.float16):
    for cfg in ((128, 128, 32, 128, 3), (128, 128, 64, 128, 3)):
        kw = dict(zip(("block_M", "block_N", "block_K", "threads", "num_stages"), cfg))
        a = torch.randn(4096, 4096, device="cuda", dtype=dtype)
        b = torch.randn(4096, 4096, device="cuda", dtype=dtype)
        ref = (a @ b).float()
        errors = []
        for _ in range(repeats):
            c = torch.zeros(4096, 4096, device="cuda", dtype=dtype)
            gemm_kernel(a, b, c, **kw)
            torch.cuda.synchronize()
            errors.append((c.float() - ref).abs().max().item())
        bad = sum(e > 0.05 * (1 + ref.abs().max().item()) for e in errors)
        print(f"{dtype} {cfg}: {bad}/{repeats} launches off; max |error| {max(errors):.3g}")

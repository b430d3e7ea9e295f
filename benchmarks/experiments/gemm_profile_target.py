"""The benchmark GEMM launched three times, for a profiler to pick one launch:

    N=4096 DT=float16 CFG=128,128,64,128,3 ncu -k regex:gemm -s 2 -c 1 --set full \\
        -o gemm python benchmarks/experiments/gemm_profile_target.py

CFG is block_M,block_N,block_K,threads,num_stages of ``benchmarks/run.py``'s GEMM.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

from run import gemm_kernel  # noqa: E402

n = int(os.environ.get("N", 4096))
dtype = getattr(torch, os.environ.get("DT", "float16"))
cfg = dict(zip(("block_M", "block_N", "block_K", "threads", "num_stages"),
               map(int, os.environ.get("CFG", "128,128,64,128,3").split(","))))
a = torch.randn(n, n, device="cuda", dtype=dtype)
b = torch.randn(n, n, device="cuda", dtype=dtype)
c = torch.empty(n, n, device="cuda", dtype=dtype)
for _ in range(3):
    gemm_kernel(a, b, c, **cfg)
torch.cuda.synchronize()

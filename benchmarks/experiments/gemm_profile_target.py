"""The benchmark GEMM launched three times, for a profiler to pick one launch:

    N=4096 DT=float16 CFG=128,128,64,128,3 ncu -k regex:gemm -s 2 -c 1 --set full \\
        -o gemm python benchmarks/experiments/gemm_profile_target.py

CFG is block_M,block_N,block_K,threads,num_stages of ``benchmarks/run.py``'s GEMM;
PERSISTENT=1 launches its persistent kernel (the seed listing) instead.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

from run import gemm_kernel, gemm_persistent_kernel  # noqa: E402

n = int(os.environ.get("N", 4096))
dtype = getattr(torch, os.environ.get("DT", "float16"))
cfg = dict(zip(("block_M", "block_N", "block_K", "threads", "num_stages"),
               map(int, os.environ.get("CFG", "128,128,64,128,3").split(","))))
a = torch.randn(n, n, device="cuda", dtype=dtype)
b = torch.randn(n, n, device="cuda", dtype=dtype)
c = torch.empty(n, n, device="cuda", dtype=dtype)
if os.environ.get("PERSISTENT") == "1":
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    launch = lambda: gemm_persistent_kernel(a, b, c, sms=sms, **cfg)  # noqa: E731
else:
    launch = lambda: gemm_kernel(a, b, c, **cfg)  # noqa: E731
for _ in range(3):
    launch()
torch.cuda.synchronize()

"""One GEMM configuration, launched a few times, for a profiler:

    ncu -k regex:gemm_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        python benchmarks/profile_gemm.py 4096 128 128 32 128 3
"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from run import gemm_kernel  # noqa: E402


def main():
    n, bm, bn, bk, threads, stages = (int(x) for x in (sys.argv[1:] + [4096, 128, 128, 32, 128, 3][
        len(sys.argv) - 1:])[:6])
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    for _ in range(4):
        gemm_kernel(a, b, c, block_M=bm, block_N=bn, block_K=bk, threads=threads,
                    num_stages=stages)
    torch.cuda.synchronize()
    compiled = gemm_kernel.compile(a, b, c, block_M=bm, block_N=bn, block_K=bk,
                                   threads=threads, num_stages=stages)
    print(f"registers {compiled.num_regs}, spills {compiled.spills}, "
          f"shared {compiled.shared_bytes} B")


if __name__ == "__main__":
    main()

"""Three launches of one FlashAttention forward for ncu (the third profiled): cuDNN's
(SDPA) or tilejit's seed kernel in one configuration, b4 s4096 h32 d128.

    ncu -k regex:flash --launch-skip 2 --launch-count 1 --section SourceCounters ... \\
        python benchmarks/experiments/attention_ncu_driver.py cudnn|BM,BN,THREADS [DTYPE]
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples", "flash_attention")]

import tilejit  # noqa: E402
from flash_attn import flashattn  # noqa: E402


def main():
    which = sys.argv[1]
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float16
    q, k, v = (torch.randn(4, 4096, 32, 128, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    if which == "cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for _ in range(3):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
    else:
        bm, bn, threads = map(int, which.split(","))
        kernel = tilejit.kernel(flashattn.func, fast_math=True)
        for _ in range(3):
            kernel(q, k, v, o, block_M=bm, block_N=bn, threads=threads, num_stages=2)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

"""One launch each of tilejit's FlashAttention and torch's FA2 backend, for ncu.

    ncu --launch-skip 2 --launch-count 1 -k regex:'flash|flashattn' \\
        --section SpeedOfLight --section WarpStateStats ... \\
        python benchmarks/experiments/attention_profile.py [BM BN THREADS STAGES]

Both run twice before the profiled launch (compile, warm-up); batch 4, 32 heads, seq 4096,
head dim 128, fp16, non-causal, as in ``benchmarks/run.py attention``.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))

import tilejit  # noqa: E402
from flash_attn import flashattn  # noqa: E402


def main():
    bm, bn, threads, stages = (int(x) for x in (sys.argv[1:5] or (128, 64, 128, 2)))
    b, h, s, d = 4, 32, 4096, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    kernel = tilejit.kernel(flashattn.func, fast_math=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    for _ in range(3):
        kernel(q, k, v, o, block_M=bm, block_N=bn, threads=threads, num_stages=stages)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

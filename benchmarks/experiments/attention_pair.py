"""tilejit's attention and FA2 (torch SDPA, FLASH_ATTENTION backend) launched in turn,
for a profiler: ``ncu -k regex:flash --launch-skip 2 --launch-count 2 ...`` gets one of
each after a warm-up pair.

    python benchmarks/experiments/attention_pair.py [causal]
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]
import tilejit  # noqa: E402
from flash_attention.flash_attn import flashattn  # noqa: E402


def main():
    causal = "causal" in sys.argv
    kernel = tilejit.kernel(flashattn.func, fast_math=True)
    q, k, v = (torch.randn(4, 4096, 32, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for _ in range(2):
        kernel(q, k, v, o, is_causal=causal)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

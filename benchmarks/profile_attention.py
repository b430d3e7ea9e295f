"""One FlashAttention configuration, launched a few times, for a profiler:

    ncu -k regex:flashattn --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section Occupancy \\
        python benchmarks/profile_attention.py 128 64 256 2 [causal] [fast_math]

Arguments: block_M block_N threads num_stages, then the words ``causal`` and
``fast_math`` when wanted; the shape is the benchmark's (b4 h32 s4096 d128 fp16). With
the word ``backward``, the backward example's kernels (``attention_backward``; profile
``-k regex:flashattn_bwd_kernel``) with those block sizes instead.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
import tilejit  # noqa: E402
from flash_attn import flashattn  # noqa: E402


def main():
    numbers = [int(a) for a in sys.argv[1:] if a.isdigit()]
    bm, bn, threads, stages = (numbers + [128, 64, 256, 2][len(numbers):])[:4]
    causal = "causal" in sys.argv
    kernel = tilejit.kernel(flashattn.func, fast_math=True) if "fast_math" in sys.argv \
        else flashattn
    q, k, v = (torch.randn(4, 4096, 32, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    cfg = dict(block_M=bm, block_N=bn, threads=threads, num_stages=stages, is_causal=causal)
    if "backward" in sys.argv:
        from flash_attn_bwd import attention_backward
        lse = torch.empty(4, 32, 4096, dtype=torch.float32, device="cuda")
        flashattn(q, k, v, o, lse, is_causal=causal)
        for _ in range(4):
            attention_backward(q, k, v, o, lse, q, causal, block_M=bm, block_N=bn,
                               threads=threads, num_stages=stages)
        torch.cuda.synchronize()
        print(f"flashattn_bwd {bm}x{bn} t{threads} s{stages} causal={causal}")
        return
    for _ in range(4):
        kernel(q, k, v, o, **cfg)
    torch.cuda.synchronize()
    compiled = kernel.compile(q, k, v, o, **cfg)
    print(f"flashattn {bm}x{bn} t{threads} s{stages} causal={causal}: registers "
          f"{compiled.num_regs}, spills {compiled.spills}, shared {compiled.shared_bytes} B")


if __name__ == "__main__":
    main()

"""Where the FlashAttention backward's time goes, beside SDPA's FA2 backward (issue 22):
b4 h32 s4096 d128 fp16, the example's 32x128 t256 s2 configuration.

    python benchmarks/experiments/attention_bwd_profile.py kernels [--causal]
        torch.profiler over 10 backward passes of each: every kernel's mean time
        (tilejit: Delta's preprocess, dQ's zeroing, the dK/dV kernel, dQ's conversion;
        FA2: its own preprocess, main kernel and dQ conversion)
    ncu --launch-skip 3 --launch-count 1 -k regex:'flashattn_bwd$|flash_bwd_dq_dk_dv' \\
        --section SpeedOfLight --section WarpStateStats --section InstructionStats \\
        python benchmarks/experiments/attention_bwd_profile.py one
        one backward of each after warm-up, for ncu
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))

from flash_attn import flashattn  # noqa: E402
from flash_attn_bwd import attention_backward  # noqa: E402

CONFIG = dict(block_M=32, block_N=128, threads=256, num_stages=2)


def setup(causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = 4, 32, 4096, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16,
                                 generator=g) for _ in range(4))
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
    flashattn(q, k, v, out, lse, is_causal=causal)

    def ours():
        return attention_backward(q, k, v, out, lse, dout, causal, **CONFIG)
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o2 = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def fa2():
        return torch.autograd.grad(o2, (qt, kt, vt), dout.transpose(1, 2), retain_graph=True)
    return ours, fa2


def kernels(causal):
    from torch.profiler import ProfilerActivity, profile
    ours, fa2 = setup(causal)
    for name, fn in (("tilejit", ours), ("FA2", fa2)):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        total = 0.0
        print(f"== {name} (causal={causal}): mean us per backward, by kernel")
        for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
            if ev.device_time_total <= 0:
                continue
            us = ev.device_time_total / 10
            total += us
            print(f"{us:10.1f}  x{ev.count // 10:<3} {ev.key[:110]}")
        print(f"{total:10.1f}  total")


def one(causal):
    ours, fa2 = setup(causal)
    for fn in (ours, fa2):
        for _ in range(4):
            fn()
    torch.cuda.synchronize()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "kernels"
    causal = "--causal" in sys.argv
    {"kernels": kernels, "one": one}[mode](causal)

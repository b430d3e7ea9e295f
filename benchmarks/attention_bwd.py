"""`run.py attention_bwd`: the FlashAttention backward (examples/flash_attention/
flash_attn_bwd.py: the preprocess kernel, the dK/dV kernel with dQ by atomics, and dQ's
conversion) beside SDPA's backward through the FLASH_ATTENTION and CUDNN_ATTENTION
backends, b4 h32 s4096 d128, fp16 and bf16, causal and not.

Each SDPA variant times `torch.autograd.grad` of a forward recorded once (the backward
kernels only); tilejit times `attention_backward` on the forward's output and
log-sum-exp. TFLOP/s count the backward's five products, 2.5 x the forward's
4·b·h·s²·d (halved when causal), as FlashAttention reports them. Every variant's
gradients are checked against SDPA's before timing.
"""
import functools
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (block_M query rows, block_N keys, threads, num_stages) of attention_backward: 256
# threads hold the five accumulators of head dim 128 in registers. 64 x 128 spills ~350 B
# a thread (ptxas, sm_90a) and measured fastest at c628aa4 (1.07-1.11x FA2; 0.73-0.80x at
# da697db, before the mask moved to the blocks that need it); 32-query blocks halve the
# per-iteration tiles (16 B spilled; dQ's product on mma.sync: wgmma needs 64 rows a
# warpgroup); 32 x 64 at 128 threads runs two blocks an SM
BWD_CONFIGS = [(64, 128, 256, 2), (32, 128, 256, 2), (32, 128, 256, 3), (32, 64, 128, 2)]


def bench_attention_bwd(b=4, h=32, s=4096, d=128):
    sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
    from flash_attn import flashattn
    from flash_attn_bwd import attention_backward
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            rows += _rows(flashattn, attention_backward, dtype, causal, b, h, s, d)
    return rows


def _rows(flashattn, attention_backward, dtype, causal, b, h, s, d):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tilejit.tuning.bench import interleaved_times
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g)
                     for _ in range(4))
    tag = f"{str(dtype).replace('torch.', '')} causal={causal}"
    variants, grads = [], {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        try:
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                       is_causal=causal)
        except RuntimeError as e:       # a backend that does not take these inputs
            print(f"SDPA {backend.name} {tag}: {e}")
            continue
        dot = dout.transpose(1, 2)

        def run(out=out, inputs=(qt, kt, vt), dot=dot):
            return torch.autograd.grad(out, inputs, dot, retain_graph=True)
        name = f"torch SDPA {backend.name} backward {tag}"
        grads[name] = [x.transpose(1, 2) for x in run()]
        variants.append((name, run))
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
    flashattn(q, k, v, out, lse, is_causal=causal)
    for bm, bn, threads, stages in BWD_CONFIGS:
        name = f"tilejit flashattn_bwd {bm}x{bn} t{threads} s{stages} {tag}"
        run = functools.partial(attention_backward, q, k, v, out, lse, dout, causal,
                                block_M=bm, block_N=bn, threads=threads, num_stages=stages)
        grads[name] = run()
        variants.append((name, run))
    torch.cuda.synchronize()
    ref = grads[variants[0][0]]
    for name, got in grads.items():
        for x, r, what in zip(got, ref, "qkv"):
            err = ((x.float() - r.float()).norm() / r.float().norm()).item()
            assert err < 2e-2, f"{name}: d{what} relative error {err:.3g}"
    times = interleaved_times(variants, rep=10)
    flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
    best = {name: min(t) for name, t in times.items()}
    fa2 = next((t for n, t in best.items() if "FLASH" in n), None)
    cudnn = next((t for n, t in best.items() if "CUDNN" in n), None)
    return [{"name": name, "ms": t, "TFLOP/s": flops / t / 1e9,
             "vs FA2": fa2 / t if fa2 else float("nan"),
             "vs cuDNN": cudnn / t if cudnn else float("nan")} for name, t in best.items()]

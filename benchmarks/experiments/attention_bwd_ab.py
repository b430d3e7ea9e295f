"""Same-process A/B of FlashAttention backward examples (issue 22): each VARIANT is a
file holding a version of examples/flash_attention/flash_attn_bwd.py (e.g. from
`git show REV:examples/flash_attention/flash_attn_bwd.py`); all are timed round-robin
beside SDPA's FA2 backward, b4 h32 s4096 d128, fp16 and bf16, causal and not, at the
block configuration given (default 32x128 t256 s2). Gradients are checked against FA2's
before timing.

    python benchmarks/experiments/attention_bwd_ab.py NAME=FILE [NAME=FILE ...] \\
        [--config 32,128,256,2] [--json OUT]
"""
import functools
import importlib.util
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "experiments"))
from experiment_support import write_results  # noqa: E402
from flash_attn import flashattn  # noqa: E402

from tilejit.tuning.bench import interleaved_times  # noqa: E402


def _module(name, path):
    spec = importlib.util.spec_from_file_location(f"flash_attn_bwd_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    files = [a.split("=", 1) for a in argv if "=" in a and not a.startswith("--")]
    bm, bn, threads, stages = 32, 128, 256, 2
    if "--config" in argv:
        bm, bn, threads, stages = map(int, argv[argv.index("--config") + 1].split(","))
    mods = {name: _module(name, path) for name, path in files}
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = 4, 32, 4096, 128
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=dtype,
                                         generator=g) for _ in range(4))
            out = torch.empty_like(q)
            lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
            flashattn(q, k, v, out, lse, is_causal=causal)
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                     is_causal=causal)

            def fa2(o=o, inputs=(qt, kt, vt), dot=dout.transpose(1, 2)):
                return torch.autograd.grad(o, inputs, dot, retain_graph=True)
            variants = [("FA2", fa2)]
            ref = [x.transpose(1, 2) for x in fa2()]
            for name, mod in mods.items():
                run = functools.partial(mod.attention_backward, q, k, v, out, lse, dout,
                                        causal, block_M=bm, block_N=bn, threads=threads,
                                        num_stages=stages)
                for x, r in zip(run(), ref):
                    err = ((x.float() - r.float()).norm() / r.float().norm()).item()
                    assert err < 2e-2, (name, err)
                variants.append((name, run))
            times = interleaved_times(variants, rep=10)
            flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
            fa2_t = min(times["FA2"])
            tag = f"{str(dtype).replace('torch.', '')} causal={causal}"
            for name, t in times.items():
                rows.append({"name": f"{name} {tag}", "ms": min(t),
                             "TFLOP/s": flops / min(t) / 1e9, "vs FA2": fa2_t / min(t)})
                print(f"{rows[-1]['name']:32s} {min(t):8.3f} ms "
                      f"{rows[-1]['TFLOP/s']:7.1f} TFLOP/s {rows[-1]['vs FA2']:.3f} x FA2",
                      flush=True)
    if "--json" in argv:
        write_results(argv[argv.index("--json") + 1], rows,
                      config=dict(block_M=bm, block_N=bn, threads=threads, stages=stages))


if __name__ == "__main__":
    main(sys.argv[1:])

"""A/B of the wgmma waits the compiler defers in FlashAttention's backward
(passes/wgmma_waits.py), one process: each variant is the backward kernel compiled with
TJ_DEFER naming the gemms deferred (g1: dV, g3: dK; "none"), timed beside SDPA's FA2
backward. Needs the pass's TJ_DEFER hook (an experiment's; not in the product).

    python benchmarks/experiments/attention_bwd_defer.py [OUT.json]
"""
import functools
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "examples", "flash_attention"), ROOT]
os.environ["TILEJIT_DISABLE_CACHE"] = "1"

import tilejit  # noqa: E402
from flash_attn import flashattn  # noqa: E402
import flash_attn_bwd as fab  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402

VARIANTS = ["none", "g3", "g1,g3", "g1"]
CONFIGS = [(32, 128, 256, 2), (32, 128, 256, 3)]


def main(out_path=None):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = 4, 32, 4096, 128
    rows = []
    kernels = {}
    for variant in VARIANTS:
        os.environ["TJ_DEFER"] = variant
        kernels[variant] = tilejit.kernel(fab.flashattn_bwd.func)
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g)
                             for _ in range(4))
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                ref_out = torch.nn.functional.scaled_dot_product_attention(
                    qt, kt, vt, is_causal=causal)
            dot = dout.transpose(1, 2)

            def fa2(o=ref_out, inputs=(qt, kt, vt), dot=dot):
                return torch.autograd.grad(o, inputs, dot, retain_graph=True)
            ref = [x.transpose(1, 2) for x in fa2()]
            out = torch.empty_like(q)
            lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
            flashattn(q, k, v, out, lse, is_causal=causal)
            variants = [("FA2", fa2)]
            for variant, kernel in kernels.items():
                for bm, bn, t, st in CONFIGS:
                    os.environ["TJ_DEFER"] = variant       # read when it compiles
                    fab.flashattn_bwd = kernel
                    run = functools.partial(fab.attention_backward, q, k, v, out, lse, dout,
                                            causal, block_M=bm, block_N=bn, threads=t,
                                            num_stages=st)
                    got = run()
                    for x, r, what in zip(got, ref, "qkv"):
                        err = ((x.float() - r.float()).norm() / r.float().norm()).item()
                        assert err < 2e-2, f"{variant}: d{what} error {err:.3g}"
                    # each call must launch this variant's kernel: bind it in the closure
                    variants.append((f"{variant} {bm}x{bn} t{t} s{st}",
                                     functools.partial(_call, kernel, run)))
            times = interleaved_times(variants, rep=10)
            best = {n: min(x) for n, x in times.items()}
            tag = f"{str(dtype)[6:]} causal={causal}"
            for n, t in best.items():
                rows.append({"case": tag, "name": n, "ms": t, "vs FA2": best["FA2"] / t})
                print(f"{tag:24s} {n:28s} {t:8.3f} ms  {best['FA2'] / t:6.3f} of FA2")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)


def _call(kernel, run):
    fab.flashattn_bwd = kernel
    return run()


if __name__ == "__main__":
    main(*sys.argv[1:])

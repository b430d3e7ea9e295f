"""A/B of the FlashAttention backward's dQ accumulation (issue 22), b4 h32 s4096 d128,
64x128 t256 s2, beside SDPA's FA2 and cuDNN backward in the same process:

    element   T.atomic_add(dQ[.., m, .., d], dq[m, d] * sm_scale) in a T.Parallel: one
              scalar atomic per element (the example before 2026-12-02's 22nd session;
              its text is passed as a file: ELEMENT_FILE, e.g. from
              `git show 01ffd34:examples/flash_attention/flash_attn_bwd.py`)
    region    T.atomic_add(dQ[region], dq), sm_scale folded into dS: one scalar atomic
              per element (Target.has_vector_red forced off while it compiles)
    vector    the same text, red.global.add.v2/v4.f32 per run of slots

    TILEJIT_DISABLE_CACHE=1 python benchmarks/experiments/attention_bwd_atomics.py \
        ELEMENT_FILE [--json FILE]

Measured 2026-12-02 at 8fcb21c (the vector form kept):
../results/attention/2026-12-02_h200_attention_bwd_atomics_ab_8fcb21c.json
"""
import importlib.util
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "experiments"))
import tilejit  # noqa: E402
import tilejit.target  # noqa: E402
from experiment_support import write_results  # noqa: E402
from flash_attn import flashattn  # noqa: E402
import flash_attn_bwd  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402


def _element_module(path):
    spec = importlib.util.spec_from_file_location("flash_attn_bwd_element", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _backward(kernel, q, k, v, out, lse, dout, causal, cfg):
    b, s, h, d = q.shape
    delta = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
    flash_attn_bwd.flashattn_bwd_preprocess(out, dout, delta, block_M=cfg["block_M"],
                                            threads=cfg["threads"])
    dq = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    kernel(q, k, v, dout, lse, delta, dq, dk, dv, is_causal=causal, **cfg)
    return dq.to(q.dtype), dk, dv


def main():
    element = _element_module(sys.argv[1]).flashattn_bwd
    region = tilejit.kernel(flash_attn_bwd.flashattn_bwd.func)
    vector = flash_attn_bwd.flashattn_bwd
    cfg = dict(block_M=64, block_N=128, threads=256, num_stages=2)
    b, h, s, d = 4, 32, 4096, 128
    rows = []
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for causal in (False, True):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16,
                                     generator=g) for _ in range(4))
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
        flashattn(q, k, v, out, lse, is_causal=causal)
        variants, grads = [], {}
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            with sdpa_kernel(backend):
                o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                     is_causal=causal)

            def run(o=o, inputs=(qt, kt, vt), dot=dout.transpose(1, 2)):
                return torch.autograd.grad(o, inputs, dot, retain_graph=True)
            grads[backend.name] = [x.transpose(1, 2) for x in run()]
            variants.append((backend.name, run))
        saved = tilejit.target.Target.has_vector_red
        for name, kernel in (("element", element), ("region", region), ("vector", vector)):
            if name == "region":
                tilejit.target.Target.has_vector_red = property(lambda self: False)

            def run(kernel=kernel, args=(q, k, v, out, lse, dout, causal)):
                return _backward(kernel, *args, cfg)
            grads[name] = run()
            tilejit.target.Target.has_vector_red = saved
            variants.append((name, run))
        torch.cuda.synchronize()
        for name, got in grads.items():
            for x, r in zip(got, grads["FLASH_ATTENTION"]):
                err = ((x.float() - r.float()).norm() / r.float().norm()).item()
                assert err < 2e-2, (name, err)
        times = interleaved_times(variants, rep=10)
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        fa2 = min(times["FLASH_ATTENTION"])
        for name, t in times.items():
            rows.append({"name": f"{name} causal={causal}", "ms": min(t),
                         "TFLOP/s": flops / min(t) / 1e9, "vs FA2": fa2 / min(t)})
            print(f"{rows[-1]['name']:28s} {min(t):8.3f} ms {rows[-1]['TFLOP/s']:7.1f} "
                  f"TFLOP/s {rows[-1]['vs FA2']:.3f} x FA2", flush=True)
    if "--json" in sys.argv:
        write_results(sys.argv[sys.argv.index("--json") + 1], rows, config=cfg)


if __name__ == "__main__":
    main()

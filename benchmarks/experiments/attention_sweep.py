"""FlashAttention beside cuDNN and FA2 (SDPA backends) over head dims and sequence
lengths, fp16, causal and not, in one process; the configs per head dim below.

    python benchmarks/experiments/attention_sweep.py [--json FILE]

Each (head dim, length, causal) case: every variant checked against SDPA, then timed in
interleaved rounds (best round kept); ratios are to cuDNN in the same case.
"""
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples", "flash_attention")]
import tilejit  # noqa: E402
from flash_attn import flashattn  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402

# (block_M, block_N, threads, num_stages) per head dim: Q plus the stages of K and V
# within the 227 KiB of shared memory; 384 threads are three consumer warpgroups (192 rows),
# whose 160 registers a thread hold O only up to head dim 128
CONFIGS = {64: [(128, 128, 256, 2), (192, 128, 384, 2), (192, 96, 384, 2)],
           128: [(128, 128, 256, 2), (192, 80, 384, 2), (192, 96, 384, 2)],
           256: [(128, 64, 256, 2), (128, 32, 256, 2)]}
CASES = [(64, 4096), (256, 4096), (128, 1024), (128, 2048), (128, 8192), (128, 16384)]


def case(d, s, causal, kern, b=4, h=32):
    b = max(1, b * 4096 // s)          # the same tokens at every length
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.empty_like(q)
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def sdpa(backend):
        def run():
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                        is_causal=causal)
        return run
    fns = [("FA2", sdpa(SDPBackend.FLASH_ATTENTION)),
           ("cuDNN", sdpa(SDPBackend.CUDNN_ATTENTION))]
    for bm, bn, t, st in CONFIGS[d]:
        def run(bm=bm, bn=bn, t=t, st=st):
            kern(q, k, v, o, is_causal=causal, block_M=bm, block_N=bn, threads=t,
                 num_stages=st)
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:
            print(f"d{d} s{s} {bm}x{bn} t{t} s{st}: {type(e).__name__}: {e}", flush=True)
            continue
        err = (o.transpose(1, 2).float() - ref.float()).abs().max().item()
        assert err < 2e-2, f"d{d} s{s} {bm}x{bn}: error {err}"
        fns.append((f"tilejit {bm}x{bn} t{t} s{st}", run))
    times = interleaved_times(fns, rep=10)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    cudnn = min(times["cuDNN"])
    out = {n: {"ms": min(t), "TFLOP/s": flops / min(t) / 1e9, "vs cuDNN": cudnn / min(t)}
           for n, t in times.items()}
    print(f"d{d} s{s} b{b} causal={causal}",
          {n: (round(r["TFLOP/s"]), round(r["vs cuDNN"], 3)) for n, r in out.items()},
          flush=True)
    return out


def main():
    kern = tilejit.kernel(flashattn.func, fast_math=True)
    res = {"gpu": torch.cuda.get_device_name(), "commit": os.environ.get("TILEJIT_COMMIT", "")}
    for d, s in CASES:
        for causal in (False, True):
            res[f"d{d} s{s} causal={causal}"] = case(d, s, causal, kern)
    path = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    if path:
        json.dump(res, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()

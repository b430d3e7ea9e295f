"""Per-block fixed cost of the FlashAttention example against FA2: both timed at several
sequence lengths (batch 4, 32 heads, head dim 128, fp16), causal and not, in one process.

A block of 128 queries costs about F + n·t (n key blocks of 64: the prologue, the
epilogue and the masked blocks in F); fitting that line over the lengths separates a
per-block overhead from a per-iteration one, which one sequence length cannot.

    python benchmarks/experiments/attention_seqlens.py [--json FILE] [--seqs 1024,2048,4096,8192]
"""
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples", "flash_attention")]

import tilejit  # noqa: E402
from experiment_support import write_results  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402


def option(args, flag, default):
    return args[args.index(flag) + 1] if flag in args else default


def one(kernel, b, h, s, d, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.empty_like(q)

    def fa2():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                    is_causal=causal)

    def ours():
        return kernel(q, k, v, o, is_causal=causal)
    ours()
    err = (o.transpose(1, 2).float() - fa2().float()).abs().max().item()
    assert err < 2e-2, (s, causal, err)
    row = {"seq": s, "causal": causal}
    fns = [("FA2", fa2), ("tilejit", ours)]
    for name, fn in fns:      # host time of a call, the GPU queue absorbing the kernels
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        row[name + " host us/call"] = (time.perf_counter() - t0) / 20 * 1e6
        torch.cuda.synchronize()
    times = interleaved_times(fns, rounds=4, rep=20)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    for name in times:
        row[name + " ms"] = min(times[name])
        row[name + " TFLOP/s"] = flops / min(times[name]) / 1e9
    row["vs FA2"] = row["FA2 ms"] / row["tilejit ms"]
    print(f"seq {s:5d} causal={causal!s:5s}  FA2 {row['FA2 ms']:7.3f} ms  "
          f"tilejit {row['tilejit ms']:7.3f} ms  {row['vs FA2']:.3f}  host us/call: "
          f"FA2 {row['FA2 host us/call']:.1f}, tilejit {row['tilejit host us/call']:.1f}",
          flush=True)
    return row


def main():
    from flash_attn import flashattn
    args = sys.argv[1:]
    seqs = [int(s) for s in option(args, "--seqs", "1024,2048,4096,8192").split(",")]
    kernel = tilejit.kernel(flashattn.func, fast_math=True)
    rows = [one(kernel, 4, 32, s, 128, causal) for causal in (False, True) for s in seqs]
    out = option(args, "--json", None)
    if out:
        write_results(out, rows)


if __name__ == "__main__":
    main()

"""FlashAttention forward with and without the consumer warpgroups' turns at their
exponentials (``passes/softmax_turns.py``), beside cuDNN, in one process, interleaved
rounds; the two outputs are first checked equal bit for bit and against SDPA.

    python benchmarks/experiments/attention_turns_ab.py [--json FILE] [--rounds N]"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks", "experiments"),
                os.path.join(ROOT, "examples", "flash_attention")]

from tilejit.runtime.kernel import KernelFunction  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402
from experiment_support import write_results  # noqa: E402
from flash_attn import flashattn, reference  # noqa: E402

SHAPE = (4, 4096, 32, 128)
CONFIGS = [(128, 128, 256), (192, 96, 384), (192, 80, 384)]
ON = KernelFunction(flashattn.func, fast_math=True)
OFF = KernelFunction(flashattn.func, fast_math=True, switches={"softmax_turns": False})


def variants(q, k, v, o, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                    is_causal=causal)
    out = [("cuDNN", cudnn, None)]
    for bm, bn, th in CONFIGS:
        cfg = dict(block_M=bm, block_N=bn, threads=th, num_stages=2, is_causal=causal)
        for tag, kern in (("turns", ON), ("no turns", OFF)):
            out.append((f"{bm}x{bn} t{th} {tag}",
                        lambda kern=kern, cfg=cfg: kern(q, k, v, o, **cfg), cfg))
    return out


def main():
    args = sys.argv[1:]
    out = args[args.index("--json") + 1] if "--json" in args else None
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 6
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for shape in ((1, 1000, 4, 128), SHAPE):
            q, k, v = (torch.randn(*shape, device="cuda", dtype=dtype) for _ in range(3))
            o = torch.empty_like(q)
            for causal in (False, True):
                ref = reference(q, k, v, causal)
                named = variants(q, k, v, o, causal)
                results = {}
                for name, fn, _ in named[1:]:
                    o.zero_()
                    fn()
                    torch.cuda.synchronize()
                    results[name] = o.clone()
                    err = (o.float() - ref).abs().max().item()
                    assert err < 2e-2, (shape, causal, name, err)
                for bm, bn, th in CONFIGS:
                    a, b = (results[f"{bm}x{bn} t{th} {t}"] for t in ("turns", "no turns"))
                    assert torch.equal(a, b), (shape, causal, bm, bn, "turns change results")
                if shape != SHAPE:
                    print(f"checked {shape} {dtype} causal={causal}", flush=True)
                    continue
                times = interleaved_times(named, rounds=rounds, rep=20)
                bb, s, h, d = SHAPE
                flops = 4 * bb * h * s * s * d / (2 if causal else 1)
                cud = min(times["cuDNN"])
                for name, _, _ in named:
                    best = min(times[name])
                    row = {"dtype": str(dtype)[6:], "causal": causal, "name": name,
                           "ms": best, "TFLOP/s": flops / best / 1e9, "vs cuDNN": cud / best,
                           "rounds_ms": times[name]}
                    rows.append(row)
                    print(f"{row['dtype']:8s} causal={causal!s:5s} {name:24s} {best:7.3f} ms "
                          f"{row['TFLOP/s']:6.1f} TF/s  {row['vs cuDNN']:.3f} of cuDNN",
                          flush=True)
    if out:
        write_results(out, rows, shape=SHAPE)


if __name__ == "__main__":
    main()

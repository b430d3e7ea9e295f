"""EXPERIMENT (run 2026-12-02 at 2d242b3; not kept, see results/archive/NOTES-2026-12.md,
"Nineteenth session"): does interleaving the exponentials with O's rescale close
FlashAttention's gap to cuDNN?

ncu beside cuDNN (`results/profiles/2026-12-02_h200_ncu_flashattn_vs_cudnn_c48751a.md`)
put our extra stalls on MUFU.EX2 ("wait", "mio"): ptxas issues the exponentials two in
every five instructions, after the 64 rescale multiplies, while cuDNN spreads each among
the rescale and the sums. Here the example's source is edited so that one T.Parallel
loop does both (legal when block_N == dim: acc_s and acc_o are wgmma accumulators of one
layout, and nothing between the two loops touches acc_o or scores_scale):

    for i, j in T.Parallel(block_M, block_N):
        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        acc_o[i, j] *= scores_scale[i]            # moved up from after the cast

"fused" (exp, then rescale), "fused_first" (rescale, then exp) and the plain example,
128x128 t256 s2 fast_math, b4 h32 s4096 d128, fp16 and bf16, causal and not, beside
cuDNN, 8 interleaved rounds; each variant checked against SDPA first. If it pays, the
compiler should do it: fuse elementwise fragment loops of one iteration space and
layout, moving a loop up past statements that do not touch what it reads or writes.

    python benchmarks/experiments/attention_fused_rescale.py     # $OUT/fused_rescale.json
"""
import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
SOURCE = os.path.join(ROOT, "examples", "flash_attention", "flash_attn.py")
EXP = ("            for i, j in T.Parallel(block_M, block_N):\n"
       "                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)\n")
RESCALE = ("            for i, j in T.Parallel(block_M, dim):\n"
           "                acc_o[i, j] *= scores_scale[i]\n")
FUSED = EXP + "                acc_o[i, j] *= scores_scale[i]\n"
FUSED_FIRST = EXP.replace("block_N):\n", "block_N):\n                acc_o[i, j] *= "
                          "scores_scale[i]\n")
VARIANTS = {"plain": None, "fused": FUSED, "fused_first": FUSED_FIRST}


def load(name):
    """The example's kernel with the variant's edit, fast_math."""
    import tilejit
    src = open(SOURCE).read()
    if VARIANTS[name] is not None:
        assert EXP in src and RESCALE in src, "the example changed: update the edit"
        src = src.replace(RESCALE, "").replace(EXP, VARIANTS[name])
    path = os.path.join(tempfile.mkdtemp(), f"fa_{name}.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"fa_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return tilejit.kernel(mod.flashattn.func, fast_math=True), mod.reference


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from tilejit.tuning.bench import interleaved_times
    b, h, s, d = 4, 32, 4096, 128
    cfg = dict(block_M=128, block_N=128, threads=256, num_stages=2)
    kernels = {name: load(name) for name in VARIANTS}
    res = {"gpu": torch.cuda.get_device_name(), "commit": os.environ.get("TILEJIT_COMMIT", "")}
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
        o = torch.empty_like(q)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for causal in (False, True):
            fns = []
            for name, (kernel, reference) in kernels.items():
                small = [x[:1, :777, :2] for x in (q, k, v)]
                out = torch.empty_like(small[0])
                kernel(*small, out, is_causal=causal, **cfg)
                torch.cuda.synchronize()
                err = (out.float() - reference(*small, causal)).abs().max().item()
                assert err < 4e-2, (name, dtype, causal, err)
                fns.append((name, lambda kernel=kernel, c=causal, t=(q, k, v, o): kernel(
                    *t, is_causal=c, **cfg)))

            def cudnn(causal=causal, t=(qt, kt, vt)):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
            fns.append(("cudnn", cudnn))
            for _, fn in fns:
                fn()
            torch.cuda.synchronize()
            times = interleaved_times(fns, rounds=8)
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            cud = min(times["cudnn"])
            key = f"{str(dtype)[6:]} causal={causal}"
            res[key] = {n: {"best_ms": min(t), "TFLOP/s": flops / min(t) / 1e9,
                            "vs_cudnn": cud / min(t), "rounds_ms": t} for n, t in times.items()}
            print(key, {n: (round(flops / min(t) / 1e9, 1), round(cud / min(t), 3))
                        for n, t in times.items()}, flush=True)
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "fused_rescale.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()

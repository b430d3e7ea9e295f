"""EXPERIMENT (run 2026-12-02 at 0b9b741; not kept, 1-6 % slower at best, level at the
median: results/archive/NOTES-2026-12.md, "Nineteenth session"): does a suspend-time
hint on the mbarrier waits help the warp-specialized kernels?

ncu beside cuDNN (`results/profiles/2026-12-02_h200_ncu_flashattn_vs_cudnn_c48751a.md`)
counted ~9 % of our FlashAttention's instructions in the producer's wait loop. Every
mbarrier wait is `mbarrier.try_wait.parity` in a loop; without a hint a waiting thread is
suspended for a system-dependent time, then the loop tries again. With
`suspendTimeHint` = 10 ms (the value CUTLASS's barrier waits pass) a thread sleeps until
the phase completes, so a waiting producer (or consumer) issues almost nothing.

Same process, same inputs: the plain kernels compiled first, then `try_wait` lowered
with the hint (the lowering's inline-asm helper patched here, the disk cache off), the
hinted kernels compiled as new kernel objects, their PTX checked for the hint. Timed in
interleaved rounds beside cuDNN (attention, 128x128 t256 s2 fast_math, b4 h32 s4096
d128, fp16/bf16, causal or not) and cuBLAS (the persistent GEMM 128x256x64 t256 s3,
fp16/bf16 4096^3 and 8192^3).

    TILEJIT_DISABLE_CACHE=1 python benchmarks/experiments/wait_hint.py   # $OUT/wait_hint.json
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples"),
                os.path.join(ROOT, "examples", "flash_attention")]
HINT = 10_000_000           # ns


def hint_the_waits():
    import tilejit.codegen.lowering.tma as tma
    plain = tma._asm

    def hinted(builder, text, constraints, args):
        if "try_wait.parity" in text:
            assert "[$0], $1;" in text, text
            text = text.replace("[$0], $1;", f"[$0], $1, {HINT};")
        return plain(builder, text, constraints, args)
    tma._asm = hinted


def main():
    assert os.environ.get("TILEJIT_DISABLE_CACHE") == "1", "run with TILEJIT_DISABLE_CACHE=1"
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import tilejit
    from tilejit.tuning.bench import interleaved_times
    from flash_attn import flashattn, reference
    from run import gemm_persistent_kernel
    res = {"gpu": torch.cuda.get_device_name(), "commit": os.environ.get("TILEJIT_COMMIT", "")}
    b, h, s, d = 4, 32, 4096, 128
    acfg = dict(block_M=128, block_N=128, threads=256, num_stages=2)
    gcfg = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3, sms=132)
    cases = []          # (key, flops, make_fns(kernels) -> [(name, fn)], peer fn, check)
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
        o = torch.empty_like(q)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for causal in (False, True):
            def run(kern, c=causal, t=(q, k, v, o)):
                kern(*t, is_causal=c, **acfg)

            def check(kern, c=causal, t=(q, k, v)):
                small = [x[:1, :777, :2] for x in t]
                out = torch.empty_like(small[0])
                kern(*small, out, is_causal=c, **acfg)
                torch.cuda.synchronize()
                err = (out.float() - reference(*small, c)).abs().max().item()
                assert err < 4e-2, err
                return kern.compile(*small, out, is_causal=c, **acfg).ptx

            def cudnn(c=causal, t=(qt, kt, vt)):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(*t, is_causal=c)
            cases.append((f"attention {str(dtype)[6:]} causal={causal}", "attn",
                          4 * b * h * s * s * d / (2 if causal else 1), run, check, cudnn))
        for n in (4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            bm = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)

            def grun(kern, t=(a, bm, c)):
                kern(*t, **gcfg)

            def gcheck(kern, t=(a, bm, c)):
                kern(*t, **gcfg)
                ref = t[0].float() @ t[1].float()
                err = ((t[2].float() - ref).abs().max() / ref.abs().max()).item()
                assert err < 1e-2, err
                return kern.compile(*t, **gcfg).ptx

            def cublas(t=(a, bm, c)):
                torch.matmul(t[0], t[1], out=t[2])
            cases.append((f"gemm {str(dtype)[6:]} {n}^3", "gemm", 2 * n ** 3, grun, gcheck,
                          cublas))
    kinds = {"attn": flashattn.func, "gemm": gemm_persistent_kernel.func}
    plain = {k: tilejit.kernel(f, fast_math=True) if k == "attn" else tilejit.kernel(f)
             for k, f in kinds.items()}
    plain_ptx = {key: check(plain[kind]) for key, kind, _, _run, check, _ in cases}
    hint_the_waits()
    hinted = {k: tilejit.kernel(f, fast_math=True) if k == "attn" else tilejit.kernel(f)
              for k, f in kinds.items()}
    res["hint_in_ptx"] = {}
    for key, kind, _, _run, check, _ in cases:
        assert f", {HINT};" not in plain_ptx[key]
        res["hint_in_ptx"][key] = check(hinted[kind]).count(f", {HINT};")
        assert res["hint_in_ptx"][key] > 0, key
    print("hint in ptx", res["hint_in_ptx"], flush=True)
    for key, kind, flops, run, _check, peer in cases:
        fns = [("plain", lambda r=run, k=plain[kind]: r(k)),
               ("hint", lambda r=run, k=hinted[kind]: r(k)), ("peer", peer)]
        for _, fn in fns:
            fn()
        torch.cuda.synchronize()
        times = interleaved_times(fns, rounds=6)
        best = {name: min(t) for name, t in times.items()}
        res[key] = {name: {"best_ms": best[name], "TFLOP/s": flops / best[name] / 1e9,
                           "vs_peer": best["peer"] / best[name], "rounds_ms": t}
                    for name, t in times.items()}
        print(key, {name: (round(flops / best[name] / 1e9, 1), round(best["peer"] / best[name], 3))
                    for name in best}, flush=True)
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "wait_hint.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()

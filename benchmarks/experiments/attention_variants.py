"""Variants of the FlashAttention example beside torch's FA2 backend, in one process.

    python benchmarks/experiments/attention_variants.py [--causal] [--json FILE] NAME ...

A variant is a source edit of ``examples/flash_attention/flash_attn.py`` and environment
variables read by the compiler while that variant compiles (experiment switches that are
not part of tilejit's interface). Every variant is checked against SDPA, then all are
timed in interleaved rounds (best round kept); "vs FA2" is against the FLASH_ATTENTION
backend in the same run. Batch 4, 32 heads, seq 4096, head dim 128, fp16, 128x64 blocks,
4 warps, 2 stages, fast_math, as ``benchmarks/run.py attention``'s first config.
"""
import importlib.util
import os
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("TILEJIT_DISABLE_CACHE", "1")   # variants differ only in switches

import tilejit  # noqa: E402
from experiment_support import environment, write_results  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402

SOURCE = os.path.join(ROOT, "examples", "flash_attention", "flash_attn.py")
NO_MASK = [("            elif not is_causal and (k + 1) * block_N > seq_len:",
            "            elif False:")]
_KERNEL = ("    with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) "
           "as (bx, by, bz):")
# query blocks in reverse order (the longest causal blocks first)
REVERSED = [(_KERNEL, _KERNEL.replace("(bx, by", "(bx0, by")
             + "\n        bx = T.ceildiv(seq_len, block_M) - 1 - bx0")]
# name -> (source edits, environment while compiling)
VARIANTS = {
    "base": ([], {}),
    "nomask": (NO_MASK, {}),
}
for spec in os.environ.get("ATTN_VARIANTS", "").split(";"):   # "name=K=V,K=V;..."
    if spec.strip():
        name, _, env = spec.partition("=")
        edits = (NO_MASK if "nomask" in name else []) + (REVERSED if "rev" in name else [])
        VARIANTS[name] = (edits, dict(kv.split(":") for kv in env.split(",") if kv))


def load(name):
    edits, env = VARIANTS[name]
    src = open(SOURCE).read()
    for a, b in edits:
        assert a in src, (name, a)
        src = src.replace(a, b)
    path = os.path.join(tempfile.mkdtemp(), f"fa_{name.replace('+', '_')}.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"fa_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return tilejit.kernel(mod.flashattn.func, fast_math=True), env


def main():
    args = sys.argv[1:]
    causal = "--causal" in args
    out = None
    if "--json" in args:
        out = args[args.index("--json") + 1]
        args.remove(out)
    names = [a for a in args if not a.startswith("--")] or list(VARIANTS)
    b, h, s, d = 4, 32, 4096, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.empty_like(q)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def fa2():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    fns = [("FA2", fa2)]
    regs = {}
    for name in names:
        kernel, env = load(name)
        with environment(env):
            kernel(q, k, v, o, is_causal=causal)
            torch.cuda.synchronize()
        err = (o.transpose(1, 2).float() - ref.float()).abs().max().item()
        assert err < 2e-2, f"{name}: error {err}"
        fns.append((name, lambda kernel=kernel: kernel(q, k, v, o, is_causal=causal)))
    times = interleaved_times(fns, rounds=5, rep=20)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    base = min(times["FA2"])
    rows = []
    for name, _ in fns:
        best = min(times[name])
        rows.append({"name": name, "causal": causal, "ms": best, "TFLOP/s": flops / best / 1e9,
                     "vs FA2": base / best, "env": VARIANTS.get(name, ([], {}))[1]})
        print(f"{name:40s} causal={causal!s:5s} {best:8.3f} ms {flops / best / 1e9:7.1f} TF "
              f"{base / best:6.3f} of FA2", flush=True)
    if out:
        write_results(out, rows, regs=regs)


if __name__ == "__main__":
    main()

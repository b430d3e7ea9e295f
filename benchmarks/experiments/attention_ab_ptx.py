"""Two compilers' FlashAttention in ONE process: the forward kernel of another tree's
compiler (its PTX) timed beside this tree's, interleaved, with cuDNN as the yardstick.

    PYTHONPATH=<base tree> python benchmarks/experiments/attention_ab_ptx.py dump DIR
    python benchmarks/experiments/attention_ab_ptx.py run DIR [--json FILE]

``TILEJIT_AB_CONFIGS="128,128,256,2;..."`` (block_M, block_N, threads, stages) picks the
configurations. ``dump`` on a machine without a GPU compiles for sm_90a (the H200's).

``dump`` compiles each configuration with whatever tilejit is importable and writes its
PTX and launch data to DIR; ``run`` compiles the same configurations with this tree and
launches the dumped PTX through a second kernel object of the same source whose compile
returns the dumped code (same name, parameters and tensor maps, checked). Separate
processes moved SDPA's own times by −8 % to +5 % (2026-12-04), larger than the change
being measured; in one process both kernels see the same clocks and neighbours."""
import dataclasses
import json
import os
import sys

import torch

import tilejit

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tilejit.__file__))),
                        "examples", "flash_attention")
sys.path.insert(0, EXAMPLES)
from flash_attn import flashattn  # noqa: E402

CONFIGS = ([tuple(map(int, c.split(","))) for c in os.environ["TILEJIT_AB_CONFIGS"].split(";")]
           if os.environ.get("TILEJIT_AB_CONFIGS")
           else [(128, 64, 128, 2), (192, 80, 384, 2), (192, 96, 384, 2)])
SHAPE = (4, 4096, 32, 128)


def cases():
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            for bm, bn, th, st in CONFIGS:
                yield (f"{bm}x{bn}_t{th}_s{st}_{str(dtype)[6:]}_{'causal' if causal else 'full'}",
                       dtype, causal, dict(block_M=bm, block_N=bn, threads=th, num_stages=st))


def tensors(dtype):
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v = (torch.randn(*SHAPE, device=device, dtype=dtype) for _ in range(3))
    return q, k, v, torch.empty_like(q)


def dump(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    kernel = tilejit.kernel(flashattn.func, fast_math=True)
    for key, dtype, causal, cfg in cases():
        q, k, v, o = tensors(dtype)
        where = {} if torch.cuda.is_available() else dict(target="cuda", arch="sm_90a")
        c = kernel.compile(q, k, v, o, is_causal=causal, **cfg, **where).compiled
        with open(os.path.join(out_dir, key + ".json"), "w") as f:
            json.dump({"name": c.name, "ptx": c.ptx, "shared_bytes": c.shared_bytes,
                       "param_formats": repr(c.param_formats),
                       "tensor_maps": repr(c.tensor_maps),
                       "block_threads": c.block_threads}, f)
        print("dumped", key, c.shared_bytes, "B shared")


def run(in_dir, json_path=None):
    import tilejit.runtime.kernel as runtime_kernel
    new = tilejit.kernel(flashattn.func, fast_math=True)
    base = tilejit.kernel(flashattn.func, fast_math=True)
    current = {}
    original = runtime_kernel.load_or_compile

    def load_or_compile(kernel, spec):
        compiled = original(kernel, spec)
        if kernel is not base:
            return compiled
        dumped = current["dumped"]
        for field in ("name", "block_threads"):
            assert dumped[field] == getattr(compiled, field), field
        for field in ("param_formats", "tensor_maps"):
            assert dumped[field] == repr(getattr(compiled, field)), field
        return dataclasses.replace(compiled, ptx=dumped["ptx"],
                                   shared_bytes=dumped["shared_bytes"])
    runtime_kernel.load_or_compile = load_or_compile
    rows = []
    for key, dtype, causal, cfg in cases():
        path = os.path.join(in_dir, key + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            current["dumped"] = json.load(f)
        rows.append(one_case(key, dtype, causal, cfg, base, new))
    if json_path:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from experiment_support import write_results
        write_results(json_path, rows, experiment="attention_ab_ptx")


def one_case(key, dtype, causal, cfg, base, new):
    """cuDNN, the dumped kernel and this tree's, checked against SDPA, then interleaved."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tilejit.tuning.bench import interleaved_times
    q, k, v, o = tensors(dtype)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal)
    fns = [("cudnn", cudnn), ("base", lambda: base(q, k, v, o, is_causal=causal, **cfg)),
           ("new", lambda: new(q, k, v, o, is_causal=causal, **cfg))]
    for name, fn in fns[1:]:
        o.zero_()
        fn()
        torch.cuda.synchronize()
        err = (o.transpose(1, 2).float() - ref.float()).abs().max().item()
        assert err < 2e-2, f"{key} {name}: error {err}"
    times = interleaved_times(fns, rounds=6, rep=20)
    best = {name: min(t) for name, t in times.items()}
    flops = 4 * SHAPE[0] * SHAPE[2] * SHAPE[1] ** 2 * SHAPE[3] / (2 if causal else 1)
    row = {"case": key, **{f"{n} ms": best[n] for n in best},
           "base/cuDNN": best["cudnn"] / best["base"], "new/cuDNN": best["cudnn"] / best["new"],
           "new speed-up": best["base"] / best["new"],
           "new TFLOP/s": flops / best["new"] / 1e9}
    print(f"{key:32s} cuDNN {best['cudnn']:.3f}  base {best['base']:.3f} "
          f"({row['base/cuDNN']:.3f})  new {best['new']:.3f} ({row['new/cuDNN']:.3f})  "
          f"new/base speed {row['new speed-up']:.3f}", flush=True)
    return row


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv
            else None)

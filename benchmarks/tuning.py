"""`run.py autotune` and `run.py carver` (issue 24, items 3 and 4).

autotune: ``@tilejit.autotune`` over 16 block shapes of run.py's GEMM (4096³ fp16, the
carver's top 16 for it), each mode in a fresh process-local disk cache: the configs
compiled by worker processes first (``tuning/precompile.py``, as many as the CPUs) and
then timed one at a time, against one worker (each config compiled at its first timed
launch). A row per mode: the compile phase, the timing phase, the whole tuning, the
configs that ran and the ones skipped.

carver: the recommender's top 3 beside a hand-written grid, all checked and then timed
in interleaved rounds in one process: run.py's GEMM at 4096³ fp16 (grid: run.py's
GEMM_CONFIGS) and the FlashAttention kernel at b4 h32 s4096 d128 fp16, causal and not
(grid: run.py's ATTENTION_CONFIGS; fast_math for all). A row per variant, and one
"carver best ÷ grid best" row per workload (time of the grid's best over the time of
the carver's best: ≥ 0.95 is within 5 %).
"""
import os
import sys
import tempfile
import time
import warnings

import torch

import tilejit
from tilejit.carver.recommend import CUDA, MatmulTemplate
from tilejit.carver.templates import FlashAttentionTemplate
from tilejit.tuning.bench import interleaved_times

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gemm_configs(n, topk):
    hints = MatmulTemplate(n, n, n, "float16", "float16", "float32") \
        .with_arch(CUDA.from_device()).recommend_hints(topk=topk)
    return [h.config for h in hints]


def bench_autotune(n=4096):
    from run import gemm_kernel
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    configs = _gemm_configs(n, 16)
    rows = []
    saved = os.environ.get("TILEJIT_CACHE_DIR")
    for workers in (None, 1):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["TILEJIT_CACHE_DIR"] = cache
            kernel = tilejit.kernel(gemm_kernel.func)      # no specialization in memory
            tuned = tilejit.autotune(configs, warmup=5, rep=20,
                                     compile_workers=workers)(kernel)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tuned(a, b, c)
                torch.cuda.synchronize()
            total = time.perf_counter() - start
            pre = tuned.precompiled
            compile_s = pre["seconds"] if pre else 0.0
            ran = sum(ms is not None for _, ms, _ in tuned.timings)
            rows.append({
                "name": (f"autotune {len(configs)} GEMM configs {n}^3 fp16, "
                         f"{pre['workers'] if pre else 1} compile worker(s)"),
                "compile phase s": compile_s if pre else float("nan"),
                "timing phase s": total - compile_s,
                "total s": total, "configs timed": ran, "configs skipped": len(configs) - ran,
                "best": str(tuned.best_config)})
    if saved is None:
        os.environ.pop("TILEJIT_CACHE_DIR", None)
    else:
        os.environ["TILEJIT_CACHE_DIR"] = saved
    return rows


def _timed_rows(label, variants, check, flops):
    ok = []
    for name, fn in variants:
        try:
            fn()
            torch.cuda.synchronize()
            check(name)
        except Exception as e:      # a config that does not compile or run is reported
            print(f"{name}: {type(e).__name__}: {e}")
            continue
        ok.append((name, fn))
    times = interleaved_times(ok, rep=20)
    rows = [{"name": name, "ms": min(times[name]), "TFLOP/s": flops / min(times[name]) / 1e9}
            for name, _ in ok]
    grid = [r["ms"] for r in rows if " grid " in r["name"]]
    carver = [r["ms"] for r in rows if " carver " in r["name"]]
    if grid and carver:
        rows.append({"name": f"{label}: carver best ÷ grid best (time ratio, ≥ 0.95 is "
                             f"within 5 %)", "ratio": min(grid) / min(carver)})
    return rows


def bench_carver(n=4096, b=4, h=32, s=4096, d=128):
    from run import ATTENTION_CONFIGS, GEMM_CONFIGS, gemm_kernel
    rows = []
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    bm = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = a @ bm

    def gemm_check(name):
        err = (c.float() - ref.float()).abs().max().item()
        assert err < 0.05 * (1 + ref.float().abs().max().item()), f"{name}: error {err}"
    variants = []
    for tag, configs in (("grid", GEMM_CONFIGS), ("carver", _gemm_configs(n, 3))):
        for cfg in configs:
            label = "x".join(str(cfg[k]) for k in ("block_M", "block_N", "block_K"))
            variants.append((f"gemm {n}^3 fp16 {tag} {label} t{cfg['threads']} "
                             f"s{cfg['num_stages']}",
                             lambda cfg=cfg: gemm_kernel(a, bm, c, **cfg)))
    rows += _timed_rows(f"gemm {n}^3 fp16", variants, gemm_check, 2 * n ** 3)

    sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
    from flash_attn import flashattn
    fast = tilejit.kernel(flashattn.func, fast_math=True)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    hints = FlashAttentionTemplate(b, h, d, s, s).with_arch(CUDA.from_device()) \
        .recommend_hints(topk=3)
    grid = [{k: v for k, v in cfg.items() if k != "fast_math"} for cfg in ATTENTION_CONFIGS]
    for causal in (False, True):
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        want = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        def attn_check(name, want=want):
            err = (o.transpose(1, 2).float() - want.float()).abs().max().item()
            assert err < 2e-2, f"{name}: error {err}"
        variants = []
        for tag, configs in (("grid", grid), ("carver", [x.config for x in hints])):
            for cfg in configs:
                variants.append((f"flashattn b{b} h{h} s{s} d{d} fp16 causal={causal} {tag} "
                                 f"{cfg['block_M']}x{cfg['block_N']} t{cfg['threads']} "
                                 f"s{cfg['num_stages']}",
                                 lambda cfg=cfg, causal=causal: fast(q, k, v, o,
                                                                     is_causal=causal, **cfg)))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        rows += _timed_rows(f"flashattn causal={causal}", variants, attn_check, flops)
    return rows

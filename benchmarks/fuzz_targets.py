"""The fuzzer's targets (benchmarks/fuzz_gpu_sim.py): every example kernel and seed
program, each with how to make its inputs, run it, and compute its float64 reference;
the per-dtype tolerances; the programs left out and why."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHS = [ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests", "support"),
         os.path.join(ROOT, "tests", "programs")]
sys.path[:0] = [p for p in PATHS if p not in sys.path]

# max |x - y| / (1 + max |y|) allowed, y the simulator's output or the float64 reference,
# by the dtype of the case's data. float8 (gemm_fp8, bfloat16 C): wgmma's float8 products
# are exact but its accumulator keeps about 14 bits between its k32 instructions
# (tests/language/test_gemm_float8.py), so the limit is that test's bound,
# (K/32 + 1) * 2^-13 * max sum|a*b| * |scale|, plus a bfloat16 ulp of max |C| (2^-7: the
# GPU and the simulator each round C once), over 1 + max |C|: computed per case
# (float8_tolerance).
TOLERANCE = {"float16": 2e-2, "bfloat16": 4e-2, "float32": 2e-3,
             "float8": "(K/32 + 1) * 2^-13 * max|A|.|B|^T * |scale| + 2^-7 * max|C|, "
                       "over 1 + max|C|"}

# the seed programs not fuzzed, and why (every file of tests/programs/ is a target or here)
EXCLUDED = {
    "matmul_ws_seed000": "the listing never clears C_local before its first T.gemm: "
                         "garbage on the GPU, an UninitializedReadError in the simulator "
                         "(tests/tilelang/test_seed_hopper_programs.py); fuzzed as "
                         "matmul_ws_seed000_cleared",
    "flash_attention_seed002_s13": "T.gemm with a float32 A and a float16 B operand: a "
                                   "CompileError in tilejit (xfail in "
                                   "tests/tilelang/test_seed_programs.py)",
}
# what is fuzzed of a program only in part: flashattn_seed000's non-causal path reads acc_s
# before writing it (the simulator reports it), so only is_causal=True is drawn;
# flash_attention_seed002_ch13 does not mask keys past the sequence, so its length is a
# multiple of block_n


# ------------------------------------------------------------------------ the targets

@dataclass
class Target:
    """A kernel to fuzz. ``make(s, dtype, cfg, var, g)`` builds the inputs on the host
    (tensors and scalars, outputs as zeros) for the sizes ``s``; ``run(x, cfg, var)`` calls
    the kernel on them (on the GPU or in the simulator: where the tensors are) and returns
    its outputs; ``reference(x, s, dtype, cfg, var)`` the same outputs in float64 (None:
    no reference). ``dims``: name -> (lo, hi[, step]) or a list of choices; ``configs`` a
    list of constexpr dicts, or {dtype: list}; a config key naming a dimension fixes it."""
    name: str
    source: str                 # "example" or "seed program"
    make: object
    run: object
    reference: object
    dims: dict
    dtypes: tuple = ("float16",)
    configs: object = (dict(),)
    variants: tuple = (dict(),)
    needs: tuple | None = None  # (major, minor) compute capability the GPU run needs
    tolerance: object = None    # (x, s, outputs) -> limit, instead of TOLERANCE[dtype]
    more: object = None         # (rng, s, small) -> more sizes (varlen's lengths)
    max_cases: int | None = None
    cost: int = 1               # how long a case takes, roughly (the largest start first)
    covers: tuple = ()          # the example kernels it runs, where not the one it is named

    def kernels(self) -> tuple:
        return self.covers or (self.name,)


def _torch():
    import torch
    return torch


def _dt(name):
    torch = _torch()
    return {"float8_e4m3": torch.float8_e4m3fn}.get(name) or getattr(torch, name)


def _randn(g, shape, dtype, scale=1.0):
    torch = _torch()
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(_dt(dtype))


def _zeros(shape, dtype):
    torch = _torch()
    return torch.zeros(*shape, dtype=_dt(dtype))


def _d(t):
    return t.double().cpu()


def _call(kernel, *outputs):
    """run() of a kernel that writes into its arguments: all of ``x`` in order."""
    def run(x, cfg, var):
        kernel(*x.values(), **cfg)
        return [x[o] for o in outputs]
    return run


def _gemm_blocks(blocks, stages=None, keys=("block_M", "block_N", "block_K")):
    out = []
    for b in blocks:
        cfg = dict(zip(keys, b))
        for s in (stages or [None]):
            out.append(dict(cfg, num_stages=s) if s is not None else cfg)
    return out


# tests/language/test_gemm.py's block shapes at 128 threads (float32: block_K 16)
GEMM_BLOCKS = [(128, 128, 32), (64, 64, 32), (64, 128, 64), (128, 64, 16)]
GEMM_BLOCKS_F32 = [(128, 128, 16), (64, 64, 16)]
# (N, block_M) of tests/language/test_reductions.py's softmax and norm cases, and the
# whole rows of 256-thread blocks the first GPU run drew
SOFTMAX_ROWS = [(256, 1), (256, 4), (1, 4), (512, 2), (1024, 1), (64, 16), (2048, 1),
                (4096, 1)]
NORM_ROWS = [(512, 4), (1, 2), (256, 1), (128, 8), (1024, 1), (1, 64), (768, 1), (3072, 1)]
ONLINE_BLOCKS = [(2, 256), (1, 2048), (4, 64), (4, 128), (4, 256), (1, 512), (1, 1024),
                 (8, 128)]
ROW_SUM_BLOCKS = [(4, 1024), (4, 64), (8, 128), (4, 256)]
# flash_attn.py's tested configurations: its defaults, 64x64 (the backward's forward),
# 32x32 (a layout conversion), two and three consumer warpgroups
ATTENTION = [{}, {"block_M": 64, "block_N": 64}, {"block_M": 32, "block_N": 32, "threads": 128},
             {"block_M": 128, "block_N": 128, "threads": 256, "num_stages": 2},
             {"block_M": 192, "block_N": 96, "threads": 384, "num_stages": 2}]
# whole rows of the seeds' 128/256-thread programs: their tests' lengths and the powers
# of two between
SEED_ROWS = [64, 128, 256, 512, 1024]
CALLS = ({"call": "direct"}, {"call": "compile"})     # f(x, **p) or f.compile(x, **p)(x)


def _bshd_to_bhsd(layout, *xs):
    return [x.transpose(1, 2) if layout == "bshd" else x for x in xs]


def _attention_lse(q, k, causal, layout):
    """The log-sum-exp of the scaled scores, (batch, heads, seq), in float64."""
    q, k = _bshd_to_bhsd(layout, q.double(), k.double())
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[2]
        s = s.masked_fill(_torch().ones(n, n, dtype=_torch().bool).triu(1), float("-inf"))
    return _torch().logsumexp(s, -1)


def _sdpa64(q, k, v, causal=False):
    """bhsd attention in float64."""
    return _torch().nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal)


def _layer_norm64(x, w, b, eps):
    return _torch().nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(),
                                             b.double(), eps)


def _rms_norm64(x, w, eps):
    xd = x.double()
    return xd * _torch().rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def float8_tolerance(x, s, outputs):
    """TOLERANCE['float8'] for this case: wgmma's accumulation bound (K/32 + 1) * 2^-13
    of sum|a*b| (test_gemm_float8.assert_wgmma_accumulation) plus a bfloat16 ulp."""
    a, b, scale = x["A"].double(), x["B"].double(), abs(x["scale"])
    want = (a @ b.T) * scale
    magnitude = (a.abs() @ b.abs().T) * scale
    big = float(want.abs().max()) if want.numel() else 0.0
    bound = (s["K"] / 32 + 1) * 2.0 ** -13 * (float(magnitude.max()) if want.numel() else 0)
    return (bound + 2.0 ** -7 * big + 1e-6) / (1 + big)


def _targets():
    torch = _torch()
    import tilejit
    import tilejit.language as T
    import elementwise_2d
    import gemm
    import gemm_epilogue
    import gemm_fp8
    import gemm_multicast
    import norms
    import row_sum
    import softmax
    import splitk_gemm
    import vector_add
    from flash_attention import flash_attn, flash_attn_bwd, flash_attn_varlen

    targets = []

    def add(name, source="example", **kw):
        targets.append(Target(name=name, source=source, **kw))

    # -- the examples ------------------------------------------------------------------
    add("vector_add.vector_add",
        make=lambda s, t, c, v, g: {"A": _randn(g, (s["N"],), t), "B": _randn(g, (s["N"],), t),
                                    "C": _zeros((s["N"],), t)},
        run=_call(vector_add.vector_add, "C"),
        reference=lambda x, s, t, c, v: [_d(x["A"]) + _d(x["B"])],
        dims={"N": (1, 5000)}, dtypes=("float16", "bfloat16", "float32"),
        configs=[{"block": b} for b in (256, 512, 1024, 2048)])
    add("vector_add.relu",
        make=lambda s, t, c, v, g: {"X": _randn(g, (s["N"],), t), "Y": _zeros((s["N"],), t)},
        run=_call(vector_add.relu, "Y"),
        reference=lambda x, s, t, c, v: [_d(x["X"]).clamp(min=0)],
        dims={"N": (1, 5000)}, dtypes=("float16", "bfloat16", "float32"))

    def scale_bias_make(s, t, c, v, g):
        x = _randn(g, (s["N"], s["M"]), t).T if v["transposed"] else _randn(g, (s["M"], s["N"]), t)
        return {"X": x, "bias": _randn(g, (s["N"],), t), "Y": _zeros((s["M"], s["N"]), t),
                "alpha": round(float(torch.randn(1, generator=g)) * 2, 3)}
    add("elementwise_2d.scale_bias", make=scale_bias_make,
        run=_call(elementwise_2d.scale_bias, "Y"),
        reference=lambda x, s, t, c, v: [_d(x["X"]) * x["alpha"] + _d(x["bias"])],
        dims={"M": (1, 300), "N": (1, 700)}, dtypes=("float32",),
        variants=({"transposed": False}, {"transposed": True}))

    def gemm_make(c_dtype=None, bias=False):
        def make(s, t, c, v, g):
            x = {"A": _randn(g, (s["M"], s["K"]), t), "B": _randn(g, (s["K"], s["N"]), t)}
            if bias:
                x["bias"] = _randn(g, (s["N"],), "float32")
            x["C"] = _zeros((s["M"], s["N"]), c_dtype or t)
            return x
        return make

    gemm_dims = {"M": (1, 300), "N": (1, 300), "K": (1, 700)}
    stages = [0, 1, 2, 3, 4]
    add("gemm.matmul", make=gemm_make("float32"), run=_call(gemm.matmul, "C"),
        reference=lambda x, s, t, c, v: [_d(x["A"]) @ _d(x["B"])],
        dims=gemm_dims, dtypes=("float16", "bfloat16", "float32"),
        configs={"float16": _gemm_blocks(GEMM_BLOCKS, stages),
                 "bfloat16": _gemm_blocks(GEMM_BLOCKS, stages),
                 "float32": _gemm_blocks(GEMM_BLOCKS_F32, [2, 3])}, cost=2)
    add("gemm_epilogue.matmul_bias_relu", make=gemm_make(bias=True),
        run=_call(gemm_epilogue.matmul_bias_relu, "C"),
        reference=lambda x, s, t, c, v: [(_d(x["A"]) @ _d(x["B"]) + _d(x["bias"])).clamp(min=0)],
        dims=gemm_dims, dtypes=("float16", "bfloat16"), configs=_gemm_blocks(GEMM_BLOCKS),
        cost=2)

    def rows_make(scale=1.0):
        def make(s, t, c, v, g):
            return {"X": _randn(g, (s["M"], s["N"]), t, scale), "Y": _zeros((s["M"], s["N"]), t)}
        return make

    softmax_ref = lambda x, s, t, c, v: [torch.softmax(_d(x["X"]), dim=1)]  # noqa: E731
    add("softmax.softmax", make=rows_make(), run=_call(softmax.softmax, "Y"),
        reference=softmax_ref, dims={"M": (1, 300), "N": [256]},
        dtypes=("float16", "bfloat16", "float32"),
        configs=[{"N": n, "block_M": bm} for n, bm in SOFTMAX_ROWS])
    add("softmax.online_softmax", make=rows_make(3.0), run=_call(softmax.online_softmax, "Y"),
        reference=softmax_ref, dims={"M": (1, 300), "N": (1, 5000)},
        dtypes=("float16", "bfloat16", "float32"),
        configs=[{"block_M": bm, "block_N": bn} for bm, bn in ONLINE_BLOCKS])

    def norm_make(bias):
        def make(s, t, c, v, g):
            m, n = s["M"], s["N"]
            x = {"X": _randn(g, (m, n), t), "W": _randn(g, (n,), t)}
            if bias:
                x["B"] = _randn(g, (n,), t)
            x["Y"] = _zeros((m, n), t)
            x["eps"] = 1e-5
            return x
        return make

    norm_configs = [{"N": n, "block_M": bm} for n, bm in NORM_ROWS]
    add("norms.layer_norm", make=norm_make(True), run=_call(norms.layer_norm, "Y"),
        reference=lambda x, s, t, c, v: [_layer_norm64(x["X"], x["W"], x["B"], x["eps"])],
        dims={"M": (1, 300), "N": [256]}, dtypes=("float16", "bfloat16", "float32"),
        configs=norm_configs)
    add("norms.rms_norm", make=norm_make(False), run=_call(norms.rms_norm, "Y"),
        reference=lambda x, s, t, c, v: [_rms_norm64(x["X"], x["W"], x["eps"])],
        dims={"M": (1, 300), "N": [256]}, dtypes=("float16", "bfloat16", "float32"),
        configs=norm_configs)

    def row_sum_make(s, t, c, v, g):
        return {"X": _randn(g, (s["M"], s["N"]), t), "S": _zeros((s["M"],), "float32")}

    row_sum_configs = [{"block_M": bm, "block_N": bn} for bm, bn in ROW_SUM_BLOCKS]
    for kernel in (row_sum.row_sum, row_sum.row_sum_partials):
        add(f"row_sum.{kernel.__name__}", make=row_sum_make, run=_call(kernel, "S"),
            reference=lambda x, s, t, c, v: [_d(x["X"]).sum(1)],
            dims={"M": (1, 300), "N": (1, 5000)}, dtypes=("float16", "bfloat16", "float32"),
            configs=row_sum_configs)
    add("splitk_gemm.splitk_gemm", make=gemm_make("float32"),
        run=_call(splitk_gemm.splitk_gemm, "C"),
        reference=lambda x, s, t, c, v: [_d(x["A"]) @ _d(x["B"])],
        dims={"M": (1, 300), "N": (1, 300), "K": (1, 1500)}, dtypes=("float16", "bfloat16"),
        configs=[{"splits": n} for n in (1, 2, 4, 8)], cost=2)

    # attention: heads = kv_heads * group (grouped-query attention when group > 1)
    attention_dims = {"B": (1, 2), "S": (1, 300), "KVH": (1, 2), "G": [1, 2, 4], "D": [64, 128]}

    def attention_make(s, t, c, v, g):
        b, n, h, kvh, d = s["B"], s["S"], s["KVH"] * s["G"], s["KVH"], s["D"]
        shape = (lambda heads: (b, n, heads, d)) if c["layout"] == "bshd" else (
            lambda heads: (b, heads, n, d))
        x = {"Q": _randn(g, shape(h), t), "K": _randn(g, shape(kvh), t),
             "V": _randn(g, shape(kvh), t), "Output": _zeros(shape(h), t)}
        if v["lse"]:
            x["LSE"] = _zeros((b, h, n), "float32")
        return x

    def attention_run(x, cfg, var):
        flash_attn.flashattn(*x.values(), **cfg)
        return [x["Output"]] + ([x["LSE"]] if var["lse"] else [])

    def attention_ref(x, s, t, c, v):
        out = flash_attn.reference(x["Q"], x["K"], x["V"], c["is_causal"], c["layout"])
        lse = [_attention_lse(x["Q"], x["K"], c["is_causal"], c["layout"])] if v["lse"] else []
        return [out.double()] + lse

    add("flash_attention.flash_attn.flashattn", make=attention_make, run=attention_run,
        reference=attention_ref, dims=attention_dims, dtypes=("float16", "bfloat16"),
        configs=[dict(cfg, is_causal=causal, layout=layout) for cfg in ATTENTION
                 for causal in (False, True) for layout in ("bshd", "bhsd")],
        variants=({"lse": False}, {"lse": True}), cost=3)

    def preprocess_make(s, t, c, v, g):
        b, n, h, d = s["B"], s["S"], s["H"], s["D"]
        return {"Out": _randn(g, (b, n, h, d), t), "dO": _randn(g, (b, n, h, d), t),
                "Delta": _zeros((b, h, n), "float32")}

    add("flash_attention.flash_attn_bwd.flashattn_bwd_preprocess", make=preprocess_make,
        run=_call(flash_attn_bwd.flashattn_bwd_preprocess, "Delta"),
        reference=lambda x, s, t, c, v: [(_d(x["Out"]) * _d(x["dO"])).sum(-1).transpose(1, 2)],
        dims={"B": (1, 2), "S": (1, 600), "H": (1, 3), "D": [64, 128]},
        dtypes=("float16", "bfloat16"),
        configs=[{"block_M": 64, "threads": 128}, {"block_M": 64, "threads": 256}])

    def backward_make(s, t, c, v, g):
        b, n, h, d = s["B"], s["S"], s["H"], s["D"]
        q, k, val, dout = (_randn(g, (b, n, h, d), t) for _ in range(4))
        # the forward's output and log-sum-exp, in float64 (the forward is fuzzed above)
        out = _sdpa64(*_bshd_to_bhsd("bshd", q, k, val), causal=c["causal"]).transpose(1, 2)
        lse = _attention_lse(q, k, c["causal"], "bshd").float()
        return {"q": q, "k": k, "v": val, "out": out.to(_dt(t)), "lse": lse, "dout": dout}

    def backward_run(x, cfg, var):
        return list(flash_attn_bwd.attention_backward(*x.values(), **cfg))

    add("flash_attention.flash_attn_bwd.attention_backward",
        covers=("flash_attention.flash_attn_bwd.flashattn_bwd",
                "flash_attention.flash_attn_bwd.flashattn_bwd_preprocess"),
        make=backward_make, run=backward_run,
        reference=lambda x, s, t, c, v: list(flash_attn_bwd.reference_grads(
            x["q"], x["k"], x["v"], x["dout"], c["causal"])),
        dims={"B": (1, 2), "S": (1, 200), "H": (1, 2), "D": [32, 64, 128]},
        dtypes=("float16", "bfloat16"), configs=[{"causal": False}, {"causal": True}], cost=4)

    def varlen_more(rng, s, small):
        hi = 50 if small else 200
        return {"lens_q": [int(n) for n in rng.integers(1, hi + 1, s["batch"])],
                "lens_k": [int(n) for n in rng.integers(1, hi + 1, s["batch"])]}

    def varlen_make(s, t, c, v, g):
        h, kvh, d = s["KVH"] * s["G"], s["KVH"], s["D"]
        cu_q = torch.tensor([0] + list(np.cumsum(s["lens_q"])), dtype=torch.int32)
        cu_k = torch.tensor([0] + list(np.cumsum(s["lens_k"])), dtype=torch.int32)
        return {"Q": _randn(g, (int(cu_q[-1]), h, d), t),
                "K": _randn(g, (int(cu_k[-1]), kvh, d), t),
                "V": _randn(g, (int(cu_k[-1]), kvh, d), t), "cu_seqlens_q": cu_q,
                "cu_seqlens_k": cu_k, "max_seqlen_q": max(s["lens_q"]),
                "Output": _zeros((int(cu_q[-1]), h, d), t)}

    add("flash_attention.flash_attn_varlen.flashattn_varlen", make=varlen_make,
        run=_call(flash_attn_varlen.flashattn_varlen, "Output"),
        reference=lambda x, s, t, c, v: [flash_attn_varlen.reference(
            x["Q"], x["K"], x["V"], x["cu_seqlens_q"], x["cu_seqlens_k"], c["is_causal"])],
        dims={"batch": (1, 4), "KVH": (1, 2), "G": [1, 2, 4], "D": [32, 64, 128]},
        more=varlen_more, dtypes=("float16", "bfloat16"),
        configs=[{"is_causal": False}, {"is_causal": True}], cost=3)

    def fp8_make(s, t, c, v, g):
        return {"A": _randn(g, (s["M"], s["K"]), v["A"]), "B": _randn(g, (s["N"], s["K"]),
                                                                        "float8_e4m3"),
                "C": _zeros((s["M"], s["N"]), "bfloat16"), "scale": v["scale"]}

    add("gemm_fp8.matmul_fp8", make=fp8_make, run=_call(gemm_fp8.matmul_fp8, "C"),
        reference=lambda x, s, t, c, v: [(_d(x["A"]) @ _d(x["B"]).T) * x["scale"]],
        dims={"M": (1, 300), "N": (1, 300), "K": (1, 512)}, dtypes=("float8",),
        configs=[{"sms": n} for n in (3, 8, 16)],
        variants=tuple({"A": a, "scale": sc} for a in ("float8_e4m3", "float8_e5m2")
                       for sc in (0.25, 1.0)),
        needs=(8, 9), tolerance=float8_tolerance, cost=3)

    add("gemm_multicast.matmul_multicast", make=gemm_make(),
        run=_call(gemm_multicast.matmul_multicast, "C"),
        reference=lambda x, s, t, c, v: [_d(x["A"]) @ _d(x["B"])],
        dims={"M": (1, 400), "N": (1, 600), "K": (1, 300)}, dtypes=("float16", "bfloat16"),
        configs=[{"cluster": n, "sms": 8, "block_K": bk} for n in (2, 4) for bk in (32, 64)],
        needs=(9, 0), cost=3)

    # -- the seeds' programs (tests/programs/, TileLang style) --------------------------
    def ab(s, t, c, v, g):
        return {"A": _randn(g, (s["M"], s["K"]), t), "B": _randn(g, (s["K"], s["N"]), t)}

    matmul_ref = lambda x, s, t, c, v: [_d(x["A"]) @ _d(x["B"])]  # noqa: E731
    tdtype = {"float16": T.float16, "bfloat16": T.bfloat16, "float32": T.float32}

    def seed(name, **kw):
        add(name, source="seed program", **kw)

    def eager(fn, *names, sizes=None):
        """run() of an eager program: fn(*tensors, **cfg), or, for the compile variant,
        fn.compile(*tensors, **cfg)(*tensors) (the seeds' own calling code)."""
        def run(x, cfg, var):
            tensors = [x[n] for n in names]
            if var.get("call") == "compile":
                return [fn.compile(*tensors, **cfg)(*tensors)]
            if var.get("call") == "compile_sizes":
                return [fn.compile(**dict(sizes(x), **cfg))(*tensors)]
            return [fn(*tensors, **cfg)]
        return run

    import matmul_seed000
    seed("matmul_seed000", make=ab,
         run=lambda x, c, v: [matmul_seed000.matmul(x["A"], x["B"], *c["blocks"],
                                                    dtype=tdtype[c["dtype"]])],
         reference=matmul_ref, dims=gemm_dims, dtypes=("float16", "bfloat16"),
         configs={t: [{"blocks": b, "dtype": t} for b in ((128, 128, 32), (64, 64, 32))]
                  for t in ("float16", "bfloat16")}, cost=2)

    import matmul_kernel_seed004 as seed004

    def seed004_run(x, cfg, var):
        c = torch.zeros(seed004.M, seed004.N, dtype=torch.float16, device=x["A"].device)
        tilejit.compile(seed004.matmul_kernel, target="cuda")(x["A"], x["B"], c)
        return [c]
    seed("matmul_kernel_seed004", make=ab, run=seed004_run, reference=matmul_ref,
         dims={"M": [seed004.M], "N": [seed004.N], "K": [seed004.K]}, max_cases=1, cost=4)

    import flashattn_seed000

    def bshd_qkv(s, t, c, v, g):
        return {n: _randn(g, (s["B"], s["S"], s["H"], s["D"]), t) for n in "qkv"}

    def bhsd_qkv(s, t, c, v, g):
        return {n: _randn(g, (s["B"], s["H"], s["S"], s["D"]), t) for n in "qkv"}

    seed("flashattn_seed000", make=bshd_qkv,
         run=lambda x, c, v: [flashattn_seed000.flashattn(
             *(lambda q: (q.shape[0], q.shape[2], q.shape[1], q.shape[3]))(x["q"]), True,
             **c)(x["q"], x["k"], x["v"])],
         reference=lambda x, s, t, c, v: [_sdpa64(*_bshd_to_bhsd(
             "bshd", x["q"], x["k"], x["v"]), causal=True).transpose(1, 2)],
         dims={"B": (1, 2), "S": (1, 300), "H": (1, 3), "D": [64, 128]},
         configs=[{"num_stages": 1}, {"num_stages": 2}], cost=3)

    import matmul_seed001
    seed("matmul_seed001", make=ab, run=eager(matmul_seed001.matmul, "A", "B"),
         reference=matmul_ref, dims=gemm_dims,
         configs=[{"BM": 64, "BN": 64, "BK": 32}, {"BM": 128, "BN": 128, "BK": 32}], cost=2)

    import flash_attention_seed002_ch13 as ch13
    seed("flash_attention_seed002_ch13", make=bhsd_qkv,
         run=lambda x, c, v: [ch13.tilelang_flash_attention(
             *(lambda q: dict(batch=q.shape[0], heads=q.shape[1], sequence=q.shape[2],
                              dimension=q.shape[3]))(x["q"]).values(), **c)(
             x["q"], x["k"], x["v"])],
         reference=lambda x, s, t, c, v: [_sdpa64(x["q"], x["k"], x["v"])],
         dims={"B": (1, 2), "H": (1, 3), "S": (64, 320, 64), "D": [64, 128]},
         configs=[{"block_m": 64, "block_n": 64, "num_stages": 2, "threads": 128}], cost=3)

    import vector_add_seed002_s05 as s05
    seed("vector_add_seed002_s05",
         make=lambda s, t, c, v, g: {"A": _randn(g, (s["N"],), t), "B": _randn(g, (s["N"],), t)},
         run=eager(s05.tilelang_vector_add, "A", "B"),
         reference=lambda x, s, t, c, v: [_d(x["A"]) + _d(x["B"])],
         dims={"N": (1, 5000)}, dtypes=("float32",), configs=[{"block_size": 256}],
         variants=CALLS)

    def x_only(s, t, c, v, g):
        return {"X": _randn(g, (s["M"], s["N"]), t)}

    def x_weight(bias):
        def make(s, t, c, v, g):
            x = {"X": _randn(g, (s["M"], s["N"]), t), "W": _randn(g, (s["N"],), t)}
            if bias:
                x["B"] = _randn(g, (s["N"],), t)
            return x
        return make

    sum_ref = lambda x, s, t, c, v: [_d(x["X"]).sum(-1)]                    # noqa: E731
    softmax_ref = lambda x, s, t, c, v: [torch.softmax(_d(x["X"]), dim=-1)]  # noqa: E731
    rows = {"M": (1, 300), "N": SEED_ROWS}
    import row_sum_seed002_s06 as s06
    import softmax_seed002_s07 as s07
    import matmul_seed002_s08 as s08
    import rms_norm_seed002_s09 as s09_rms
    import layer_norm_seed002_s09 as s09_ln
    seed("row_sum_seed002_s06", make=x_only, run=eager(s06.tilelang_row_sum, "X"),
         reference=sum_ref, dims=rows, dtypes=("float32",), configs=[{"block_rows": 1}],
         variants=CALLS)
    seed("softmax_seed002_s07", make=x_only, run=eager(s07.tilelang_softmax, "X"),
         reference=softmax_ref, dims=rows, dtypes=("float32",), configs=[{"block_rows": 1}],
         variants=CALLS)
    seed("matmul_seed002_s08", make=ab, run=eager(s08.tilelang_matmul, "A", "B"),
         reference=matmul_ref, dims=gemm_dims,
         configs=[{"block_m": 128, "block_n": 128, "block_k": 32}], variants=CALLS, cost=2)
    seed("rms_norm_seed002_s09", make=x_weight(False),
         run=eager(s09_rms.tilelang_rms_norm, "X", "W"),
         reference=lambda x, s, t, c, v: [_rms_norm64(x["X"], x["W"], c["eps"])],
         dims=rows, dtypes=("float32",), configs=[{"block_rows": 1, "eps": 1e-6}],
         variants=CALLS)
    seed("layer_norm_seed002_s09", make=x_weight(True),
         run=eager(s09_ln.tilelang_layer_norm, "X", "W", "B"),
         reference=lambda x, s, t, c, v: [_layer_norm64(x["X"], x["W"], x["B"], c["eps"])],
         dims=rows, dtypes=("float32",), configs=[{"block_rows": 1, "eps": 1e-5}])

    import matmul_dynamic_mnk_seed000 as dynamic
    seed("matmul_dynamic_mnk_seed000", make=ab,
         run=lambda x, c, v: [dynamic.matmul_dynamic_mnk(
             x["A"], x["B"], 64, 64, 32, False, False, tdtype[c["dtype"]], tdtype[c["dtype"]],
             T.float32, 2, 128)],
         reference=matmul_ref, dims=gemm_dims, dtypes=("float16", "bfloat16"),
         configs={t: [{"dtype": t}] for t in ("float16", "bfloat16")}, cost=2)

    import row_sum_seed002_ch08 as ch08
    import softmax_seed002_ch09 as ch09
    import matmul_seed002_ch10 as ch10
    import layer_norm_seed002_ch11 as ch11
    import rms_norm_seed002_ch12 as ch12
    seed("row_sum_seed002_ch08", make=x_only, run=eager(ch08.tilelang_row_sum, "X"),
         reference=sum_ref, dims=rows, dtypes=("float32",))
    seed("softmax_seed002_ch09", make=x_only, run=eager(ch09.tilelang_softmax, "X"),
         reference=softmax_ref, dims={"M": (1, 300), "N": SEED_ROWS[1:] + [2048, 4096]})
    seed("matmul_seed002_ch10", make=ab,
         run=eager(ch10.tilelang_matmul, "A", "B", sizes=lambda x: dict(
             M=x["A"].shape[0], N=x["B"].shape[1], K=x["A"].shape[1])),
         reference=matmul_ref, dims=gemm_dims,
         configs=[{"block_m": 128, "block_n": 128, "block_k": 32}],
         variants=({"call": "direct"}, {"call": "compile_sizes"}), cost=2)
    seed("layer_norm_seed002_ch11", make=x_weight(True),
         run=eager(ch11.tilelang_layer_norm, "X", "W", "B"),
         reference=lambda x, s, t, c, v: [_layer_norm64(x["X"], x["W"], x["B"], 1e-5)],
         dims={"M": (1, 300), "N": SEED_ROWS[1:]})
    seed("rms_norm_seed002_ch12", make=x_weight(False),
         run=eager(ch12.tilelang_rms_norm, "X", "W"),
         reference=lambda x, s, t, c, v: [_rms_norm64(x["X"], x["W"], 1e-6)],
         dims={"M": (1, 300), "N": SEED_ROWS[1:]})

    import matmul_persistent_seed000 as persistent
    import matmul_persistent_seed000_eager as persistent_eager
    persistent_configs = [{"block_M": 64, "block_N": 64, "block_K": 32, "threads": 128,
                           "num_stages": 2},
                          {"block_M": 128, "block_N": 128, "block_K": 32, "threads": 128,
                           "num_stages": 3}]
    seed("matmul_persistent_seed000", make=ab,
         run=lambda x, c, v: [persistent.matmul_persistent(
             x["A"].shape[0], x["B"].shape[1], x["A"].shape[1], *c.values())(x["A"], x["B"])],
         reference=matmul_ref, dims=gemm_dims, configs=persistent_configs, cost=2)
    seed("matmul_persistent_seed000_eager", make=ab,
         run=eager(persistent_eager.matmul_persistent, "A", "B"), reference=matmul_ref,
         dims=gemm_dims, configs=persistent_configs, cost=2)

    import matmul_ws_seed000_cleared as ws
    seed("matmul_ws_seed000_cleared", make=ab, run=eager(ws.matmul_ws_cleared, "A", "B"),
         reference=matmul_ref,
         # T.tma_copy: rows of A and B 16-byte aligned (K and N multiples of 8)
         dims={"M": (1, 300), "N": (8, 304, 8), "K": (8, 704, 8)},
         configs=[{"block_M": 128, "block_N": 128, "block_K": 64},
                  {"block_M": 64, "block_N": 64, "block_K": 32}], needs=(9, 0), cost=2)
    return targets


_TARGETS = None


def targets():
    """Every kernel fuzzed, in a fixed order (imports the examples and programs once)."""
    global _TARGETS
    if _TARGETS is None:
        _TARGETS = {t.name: t for t in _targets()}
    return _TARGETS

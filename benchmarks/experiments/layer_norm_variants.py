"""Experiment: LayerNorm variants against the example, beside the copy (fp16 16384 x 8192).

- the example at 256 and 512 threads, and with ``min_blocks_per_sm=3``;
- ``ln_half``: the row kept in registers as fp16 (16 registers a thread, not 32), the
  statistics and the output computed in fp32 from it;
- ``ln_known``: the weight's and bias's lengths compiled in (the fragments take their
  extent from ``W.shape[0]``), so their copies have no edge path.

    python benchmarks/experiments/layer_norm_variants.py [FILE]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torch  # noqa: E402

import tilejit  # noqa: E402
import tilejit.language as T  # noqa: E402
from norms import layer_norm, rms_norm  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402


@tilejit.kernel
def ln_half(X, W, B, Y, eps, threads: T.constexpr = 256, early: T.constexpr = False):
    M, N = X.shape
    with T.Kernel(M, threads=threads) as bx:
        x = T.alloc_fragment((1, N), X.dtype)
        d = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_fragment((N,), W.dtype)
        b = T.alloc_fragment((N,), B.dtype)
        mean = T.alloc_fragment((1,), T.float32)
        var = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], x)
        if early:
            T.copy(W, w)
            T.copy(B, b)
        for i, j in T.Parallel(1, N):
            d[i, j] = x[i, j]
        T.reduce_sum(d, mean, dim=1)
        for i, j in T.Parallel(1, N):
            d[i, j] = (x[i, j] - mean[i] / N) * (x[i, j] - mean[i] / N)
        T.reduce_sum(d, var, dim=1)
        if not early:
            T.copy(W, w)
            T.copy(B, b)
        for i, j in T.Parallel(1, N):
            x[i, j] = (x[i, j] - mean[i] / N) * T.rsqrt(var[i] / N + eps) * w[j] + b[j]
        T.copy(x, Y[bx, 0])


@tilejit.kernel
def ln_known(X, W, B, Y, eps, threads: T.constexpr = 256):
    M, N = X.shape
    with T.Kernel(M, threads=threads) as bx:
        x = T.alloc_fragment((1, N), T.float32)
        d = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_fragment((W.shape[0],), W.dtype)
        b = T.alloc_fragment((B.shape[0],), B.dtype)
        mean = T.alloc_fragment((1,), T.float32)
        var = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], x)
        T.reduce_sum(x, mean, dim=1)
        for i, j in T.Parallel(1, N):
            x[i, j] = x[i, j] - mean[i] / N
            d[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(d, var, dim=1)
        T.copy(W, w)
        T.copy(B, b)
        for i, j in T.Parallel(1, N):
            x[i, j] = x[i, j] * T.rsqrt(var[i] / N + eps) * w[j] + b[j]
        T.copy(x, Y[bx, 0])


def main():
    M, N = 16384, 8192
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.randn(N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    ref_rms = x.float() * torch.rsqrt(x.float().pow(2).mean(1, keepdim=True) + 1e-5) * w.float()
    variants = [("copy", lambda: y.copy_(x), None, None)]
    for th in (256, 512):
        variants.append((f"example t{th}", lambda th=th: layer_norm(x, w, b, y, 1e-5, threads=th),
                         layer_norm, dict(threads=th)))
    variants.append(("example t256 min_blocks=3", lambda: layer_norm(
        x, w, b, y, 1e-5, threads=256, min_blocks=3), layer_norm, dict(threads=256, min_blocks=3)))
    for th in (256, 512):
        variants.append((f"half t{th}", lambda th=th: ln_half(x, w, b, y, 1e-5, threads=th),
                         ln_half, dict(threads=th)))
    variants.append(("half early t256", lambda: ln_half(x, w, b, y, 1e-5, early=True),
                     ln_half, dict(early=True)))
    for th in (256, 512):
        variants.append((f"known t{th}", lambda th=th: ln_known(x, w, b, y, 1e-5, threads=th),
                         ln_known, dict(threads=th)))
    variants.append(("rms_norm t256 (reference)", lambda: rms_norm(x, w, y, 1e-5), rms_norm, {}))
    ok = []
    for name, fn, kern, kw in variants:
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            continue
        regs = None
        if kern is not None:
            r = ref_rms if kern is rms_norm else ref
            err = (y.float() - r).abs().max().item()
            assert err < 0.02 * (1 + r.abs().max().item()), (name, err)
            args = (x, w, y, 1e-5) if kern is rms_norm else (x, w, b, y, 1e-5)
            regs = kern.compile(*args, **kw).num_regs
        ok.append((name, fn, regs))
    times = interleaved_times(ok)
    base = min(times["copy"])
    rows = []
    for name, _, regs in ok:
        best = min(times[name])
        rows.append(dict(name=name, ms=best, tbps=4 * M * N / best / 1e9, vs_copy=base / best,
                         regs=regs))
        print(f"{name:30s} {best:7.4f} ms {4 * M * N / best / 1e9:6.3f} TB/s {base / best:6.3f}"
              f"  regs {regs}")
    if len(sys.argv) > 1:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"),
                  indent=1)


if __name__ == "__main__":
    main()

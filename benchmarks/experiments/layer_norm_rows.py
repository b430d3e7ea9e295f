"""Experiment: LayerNorm with a block's rows software-pipelined through shared memory
(cp.async of the next row while this one is normalized; weight and bias read once per
block into shared memory) against the one-row-per-block example, beside the copy.

    python benchmarks/experiments/layer_norm_rows.py [FILE]
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
from norms import layer_norm  # noqa: E402
from tilejit.tuning.bench import interleaved_times  # noqa: E402


@tilejit.kernel
def ln_rows(X, W, B, Y, eps, blocks, threads: T.constexpr = 256, num_stages: T.constexpr = 2):
    M, N = X.shape
    with T.Kernel(blocks, threads=threads) as bx:
        x_s = T.alloc_shared((1, N), X.dtype)
        x = T.alloc_fragment((1, N), T.float32)
        d = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_shared((N,), W.dtype)
        b = T.alloc_shared((N,), B.dtype)
        mean = T.alloc_fragment((1,), T.float32)
        var = T.alloc_fragment((1,), T.float32)
        T.copy(W, w)
        T.copy(B, b)
        for i in T.Pipelined(T.ceildiv(M - bx, blocks), num_stages=num_stages):
            T.copy(X[bx + i * blocks, 0], x_s)
            T.copy(x_s, x)
            T.reduce_sum(x, mean, dim=1)
            for r, j in T.Parallel(1, N):
                x[r, j] = x[r, j] - mean[r] / N
                d[r, j] = x[r, j] * x[r, j]
            T.reduce_sum(d, var, dim=1)
            for r, j in T.Parallel(1, N):
                x[r, j] = x[r, j] * T.rsqrt(var[r] / N + eps) * w[j] + b[j]
            T.copy(x, Y[bx + i * blocks, 0])


@tilejit.kernel
def ln_onepass(X, W, B, Y, eps, threads: T.constexpr = 256):
    """Shifted one-pass statistics: both sums over x - x[row, 0], one after the other
    with no dependency between them."""
    M, N = X.shape
    with T.Kernel(M, threads=threads) as bx:
        x = T.alloc_fragment((1, N), T.float32)
        d = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_fragment((N,), W.dtype)
        b = T.alloc_fragment((N,), B.dtype)
        s1 = T.alloc_fragment((1,), T.float32)
        s2 = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], x)
        shift = T.cast(X[bx, 0], T.float32)
        for r, j in T.Parallel(1, N):
            x[r, j] = x[r, j] - shift
            d[r, j] = x[r, j] * x[r, j]
        T.reduce_sum(x, s1, dim=1)
        T.reduce_sum(d, s2, dim=1)
        T.copy(W, w)
        T.copy(B, b)
        for r, j in T.Parallel(1, N):
            mean = s1[r] / N
            x[r, j] = (x[r, j] - mean) * T.rsqrt(s2[r] / N - mean * mean + eps) * w[j] + b[j]
        T.copy(x, Y[bx, 0])


def main():
    M, N = 16384, 8192
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.randn(N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    variants = [("copy", lambda: y.copy_(x)),
                ("example layer_norm t256", lambda: layer_norm(x, w, b, y, 1e-5))]
    variants.append(("onepass t256", lambda: ln_onepass(x, w, b, y, 1e-5)))
    variants.append(("onepass t512", lambda: ln_onepass(x, w, b, y, 1e-5, threads=512)))
    for th, st, per_sm in ((256, 2, 2),):
        variants.append((f"rows t{th} s{st} {per_sm}/SM",
                         lambda th=th, st=st, g=per_sm * sms: ln_rows(
                             x, w, b, y, 1e-5, g, threads=th, num_stages=st)))
    ok = []
    for name, fn in variants:
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            continue
        if name != "copy":
            err = (y.float() - ref).abs().max().item()
            assert err < 0.02 * (1 + ref.abs().max().item()), (name, err)
        ok.append((name, fn))
    times = interleaved_times(ok)
    base = min(times["copy"])
    rows = []
    for name, _ in ok:
        best = min(times[name])
        rows.append(dict(name=name, ms=best, tbps=4 * M * N / best / 1e9, vs_copy=base / best))
        print(f"{name:28s} {best:7.3f} ms {4 * M * N / best / 1e9:6.3f} TB/s {base / best:6.3f}")
    if len(sys.argv) > 1:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"),
                  indent=1)


if __name__ == "__main__":
    main()

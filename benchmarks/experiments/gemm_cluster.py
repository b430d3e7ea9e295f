"""EXPERIMENT (run 2026-12-02; not kept as the GEMM benchmark's kernel: level with the
kernel without clusters, results/archive/NOTES-2026-12.md, "Twentieth session"): the
persistent GEMM in clusters of 2 and 4 blocks with B multicast
(``examples/gemm_multicast.py``) beside the same kernel without clusters
(``run.gemm_persistent_kernel``) and cuBLAS, same process, interleaved rounds.

Why: at 4096³ the persistent kernel reads 1.61 GB from L2 into the SMs (ncu, 602515f:
7.1 TB/s at 1.26 GHz; every 128×256 tile reads its 128 rows of A and 256 columns of B),
and at full clocks it trails cuBLAS by 0–10 % while at the power cap (lower clocks) it
matches it: the L2 → SM path, not the tensor cores, sets the pace. With B multicast to
the two blocks of a cluster each tile reads 128 + 128 instead of 128 + 256 rows/columns
from L2: a third less.

    python benchmarks/experiments/gemm_cluster.py [OUT.json]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples")]


def max_active_clusters(kernel, cluster, threads, shared):
    from cuda.bindings import driver as drv
    loaded = list(kernel._cache.values())[-1]
    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = 132 // cluster * cluster, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = shared
    attribute = drv.CUlaunchAttribute()
    attribute.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attribute.value.clusterDim.x, attribute.value.clusterDim.y = cluster, 1
    attribute.value.clusterDim.z = 1
    config.attrs, config.numAttrs = [attribute], 1
    err, n = drv.cuOccupancyMaxActiveClusters(loaded.module.function, config)
    return int(n) if not int(err) else f"error {err}"


def main():
    import torch
    from tilejit.tuning.bench import interleaved_times
    from gemm_multicast import matmul_multicast as gemm_cluster_kernel
    from run import gemm_persistent_kernel
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."),
                                                             "gemm_cluster.json")
    res = {"gpu": torch.cuda.get_device_name(), "commit": os.environ.get("TILEJIT_COMMIT", "")}
    cfg = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3)
    # correctness: odd sizes (a cluster's second row-block past M, partial tiles)
    for dtype in (torch.float16, torch.bfloat16):
        for m, n, k in [(1000, 1500, 700), (384, 512, 4096), (4096, 4096, 4096)]:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            ref = a.double() @ b.double()
            for cluster in (2, 4):
                c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
                gemm_cluster_kernel(a, b, c, sms=128, cluster=cluster, **cfg)
                torch.cuda.synchronize()
                err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
                res[f"check cluster {cluster} {str(dtype)[6:]} {m}x{n}x{k}"] = err
                print("check", cluster, dtype, m, n, k, err, flush=True)
                assert err < 1e-2, err
    shared = next(iter(gemm_cluster_kernel._cache.values())).compiled.shared_bytes
    grids = []
    for cluster in (2, 4):
        gemm_cluster_kernel(a, b, c, sms=132 // cluster * cluster, cluster=cluster, **cfg)
        occupancy = max_active_clusters(gemm_cluster_kernel, cluster, 384, shared)
        res[f"max_active_clusters of {cluster}"] = occupancy
        print(f"max active clusters of {cluster}:", occupancy, flush=True)
        grids.append((cluster, min(132 // cluster, occupancy) * cluster))
    for dtype in (torch.float16, torch.bfloat16):
        for n in (4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            t = (a, b, c)
            fns = [("cublas", lambda t=t: torch.matmul(t[0], t[1], out=t[2])),
                   ("persistent", lambda t=t: gemm_persistent_kernel(*t, sms=132, **cfg))]
            for cl, g in grids:
                fns.append((f"cluster{cl} sms{g}", lambda g=g, cl=cl, t=t: gemm_cluster_kernel(
                    *t, sms=g, cluster=cl, **cfg)))
            for _, fn in fns:
                fn()
            torch.cuda.synchronize()
            times = interleaved_times(fns, rounds=6)
            best = {name: min(t) for name, t in times.items()}
            med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
            key = f"gemm {str(dtype)[6:]} {n}^3"
            res[key] = {name: {"best_ms": best[name], "TFLOP/s": 2 * n ** 3 / best[name] / 1e9,
                               "vs_cublas_best": best["cublas"] / best[name],
                               "vs_cublas_median": med["cublas"] / med[name], "rounds_ms": t}
                        for name, t in times.items()}
            print(key, {name: (round(v["TFLOP/s"]), round(v["vs_cublas_best"], 3),
                               round(v["vs_cublas_median"], 3))
                        for name, v in res[key].items()}, flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

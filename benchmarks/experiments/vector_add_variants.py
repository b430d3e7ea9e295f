"""Experiment (not a product benchmark): what limits the fp32 vector add's bandwidth?
Times tilejit's generated PTX for several tile/thread shapes, and the same PTX with
every global load moved before the first arithmetic instruction (memory-level
parallelism), beside torch.add. Prints a table; JSON to argv[1] if given."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import tilejit  # noqa: E402
import tilejit.language as T  # noqa: E402
from tilejit.runtime import cuda_driver  # noqa: E402
from tilejit.tuning.bench import median_ms  # noqa: E402


@tilejit.kernel
def add(A, B, C, block: T.constexpr = 2048, threads: T.constexpr = 256):
    with T.Kernel(A.shape[0] // block, threads=threads) as bx:
        for i in T.Parallel(block):
            C[bx * block + i] = A[bx * block + i] + B[bx * block + i]


def loads_first(ptx: str) -> str:
    lines = ptx.splitlines()
    first = next(i for i, line in enumerate(lines) if "add.rn.f32" in line)
    loads = [line for line in lines[first:] if "ld.global" in line]
    rest = [line for line in lines[first:] if "ld.global" not in line]
    return "\n".join(lines[:first] + loads + rest) + "\n"


def main():
    n = 1 << 28
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    ref = a + b
    rows = []

    def run(name, fn):
        c.zero_()
        fn()
        torch.cuda.synchronize()
        assert torch.equal(c, ref), name
        ms = median_ms(fn)
        rows.append((name, ms, 12 * n / ms / 1e9))

    run("torch.add", lambda: torch.add(a, b, out=c))
    stream = torch.cuda.current_stream().cuda_stream
    for block, threads in [(1024, 256), (2048, 256), (4096, 256), (4096, 512), (8192, 512),
                           (2048, 128), (4096, 128), (8192, 1024)]:
        handle = add.compile(a, b, c, block=block, threads=threads)
        variants = (("as generated", handle.ptx), ("loads first", loads_first(handle.ptx)))
        for variant, ptx in variants:
            mod = cuda_driver.CudaModule(ptx, handle.compiled.name, 0, 0)
            launcher = cuda_driver.Launcher(mod, handle.compiled.param_formats)
            vals = (a.data_ptr(), n, 1, b.data_ptr(), n, 1, c.data_ptr(), n, 1)
            grid = (n // block, 1, 1)
            run(f"block={block} threads={threads} {variant} regs={mod.num_regs}",
                lambda launcher=launcher, grid=grid, threads=threads, vals=vals:
                launcher.launch(grid, (threads, 1, 1), 0, stream, vals))
    base = rows[0][2]
    for name, ms, bw in rows:
        print(f"{name:60s} {ms:8.3f} ms {bw:7.3f} TB/s {bw / base:6.3f}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

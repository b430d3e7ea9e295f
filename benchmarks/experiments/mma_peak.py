"""Experiment: the ceiling of ``mma.sync.m16n8k16`` (f16 in, f32 accumulate) on this GPU,
with no memory traffic at all: every warp runs ``chains`` independent accumulators
through a loop of mma instructions on register operands. It says how far the mma.sync
path (tilejit's GEMM and FlashAttention) can go; wgmma is the Hopper path's ceiling.
Prints TFLOP/s for several warps-per-SM counts; JSON to argv[1] if given.

    python benchmarks/experiments/mma_peak.py [FILE]
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from tilejit.runtime import cuda_driver  # noqa: E402


def ptx(chains: int, iters: int) -> str:
    regs = "\n".join(f"    mov.f32 %c{i}_{j}, 0f00000000;" for i in range(chains) for j in range(4))
    body = "\n".join(
        f"    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        f"{{%c{i}_0,%c{i}_1,%c{i}_2,%c{i}_3}}, {{%a0,%a1,%a2,%a3}}, {{%b0,%b1}}, "
        f"{{%c{i}_0,%c{i}_1,%c{i}_2,%c{i}_3}};" for i in range(chains))
    decl = "\n".join(f"    .reg .f32 %c{i}_<4>;" for i in range(chains))
    adds = "\n".join(f"    add.f32 %s, %s, %c{i}_0;" for i in range(chains))
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry mma_peak(.param .u64 out, .param .u32 seed)
{{
    .reg .b32 %a<4>, %b<2>, %n, %seed;
    .reg .f32 %s;
    .reg .pred %p;
    .reg .u64 %o;
{decl}
    ld.param.u32 %seed, [seed];
    mov.b32 %a0, %seed; mov.b32 %a1, %seed; mov.b32 %a2, %seed; mov.b32 %a3, %seed;
    mov.b32 %b0, %seed; mov.b32 %b1, %seed;
{regs}
    mov.u32 %n, 0;
LOOP:
{body}
    add.u32 %n, %n, 1;
    setp.lt.u32 %p, %n, {iters};
    @%p bra LOOP;
    mov.f32 %s, 0f00000000;
{adds}
    ld.param.u64 %o, [out];
    st.global.f32 [%o], %s;
    ret;
}}
"""


def main():
    out = torch.zeros(1, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for chains in (8, 16):
        iters = 4096
        mod = cuda_driver.CudaModule(ptx(chains, iters), "mma_peak")
        launcher = cuda_driver.Launcher(mod, ["Q", "I"])
        for warps in (4, 8, 16):
            for blocks_per_sm in (1, 2):
                grid = (sms * blocks_per_sm * 4, 1, 1)
                block = (32 * warps, 1, 1)
                args = (out.data_ptr(), 0x2C002C00)
                launcher.launch(grid, block, 0, 0, args)
                torch.cuda.synchronize()
                start = time.perf_counter()
                reps = 5
                for _ in range(reps):
                    launcher.launch(grid, block, 0, 0, args)
                torch.cuda.synchronize()
                sec = (time.perf_counter() - start) / reps
                flop = grid[0] * warps * chains * iters * 2 * 16 * 8 * 16
                rows.append(dict(chains=chains, warps_per_block=warps,
                                 blocks_per_sm=blocks_per_sm, tflops=flop / sec / 1e12))
                print(f"chains {chains:2d} warps/block {warps:2d} blocks/SM {blocks_per_sm}: "
                      f"{flop / sec / 1e12:7.1f} TFLOP/s")
    if len(sys.argv) > 1:
        json.dump({"gpu": torch.cuda.get_device_name(), "mma_peak": rows}, open(sys.argv[1], "w"),
                  indent=1)


if __name__ == "__main__":
    main()

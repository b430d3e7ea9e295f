"""How one ``T.gemm`` is spread over a block's warps on ``mma.sync``.

The block's ``W = threads / 32`` warps form a ``warps_m x warps_n`` grid (warp
``w = wm + warps_m * wn``); each warp owns a ``(M / warps_m) x (N / warps_n)`` piece of C,
``repeat_m x repeat_n`` instruction tiles of 16 x 8. The policy picks the grid:
``FullRow`` puts every warp along M, ``FullCol`` along N, ``Square`` makes the warp's
piece as square as the divisibility rules allow.
"""
from __future__ import annotations

from dataclasses import dataclass

from tilejit.layouts import mma_fragment, tile_fragment

WARP = 32

# (A dtype, B dtype, C dtype) -> (instruction, operand kind, k per instruction)
INSTRUCTIONS = {
    ("float16", "float16", "float32"): ("m16n8k16", "f16", 16),
    ("float16", "float16", "float16"): ("m16n8k16", "f16", 16),
    ("bfloat16", "bfloat16", "float32"): ("m16n8k16", "bf16", 16),
    ("float32", "float32", "float32"): ("m16n8k8", "tf32", 8),
    ("int8", "int8", "int32"): ("m16n8k32", "s8", 32),
}

POLICIES = ("Square", "FullRow", "FullCol")


class GemmPlanError(ValueError):
    pass


@dataclass(frozen=True)
class GemmPlan:
    M: int
    N: int
    K: int
    dtypes: tuple[str, str, str]
    transpose_A: bool
    transpose_B: bool
    policy: str
    threads: int
    warps_m: int
    warps_n: int
    instr: str
    kind: str
    k_step: int
    clear_accum: bool = False

    @property
    def warp_m(self) -> int:
        return self.M // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.N // self.warps_n

    @property
    def repeat_m(self) -> int:
        return self.warp_m // 16

    @property
    def repeat_n(self) -> int:
        return self.warp_n // 8

    def c_fragment(self):
        """The accumulator's layout: warps_m x warps_n warps, each repeat_m x repeat_n
        m16n8 accumulator tiles."""
        return tile_fragment(mma_fragment(self.instr, self.kind, "C"), self.warps_m,
                             self.warps_n, self.repeat_m, self.repeat_n)

    def a_fragment(self):
        """The layout an A operand held in registers must have: the accumulator layout
        of an M x K tile on warps_m warps (a m16n8kX A operand holds the same elements
        per thread as the m16n8 accumulators over its K columns), copied on each of the
        warps_n warp columns."""
        base = tile_fragment(mma_fragment(self.instr, self.kind, "C"), self.warps_m, 1,
                             self.repeat_m, self.K // 8)
        return base.replicated(self.warps_n) if self.warps_n > 1 else base

    def __str__(self) -> str:
        t = ("A^T " if self.transpose_A else "A ") + ("B^T" if self.transpose_B else "B")
        return (f"{self.M}x{self.N}x{self.K} {'/'.join(self.dtypes)} {t} policy={self.policy}: "
                f"mma.{self.instr}.{self.kind}, {self.warps_m}x{self.warps_n} warps, each "
                f"{self.warp_m}x{self.warp_n} = {self.repeat_m}x{self.repeat_n} tiles")


def _grids(warps: int):
    return [(wm, warps // wm) for wm in range(1, warps + 1) if warps % wm == 0]


def plan_gemm(M, N, K, dtypes, transpose_A=False, transpose_B=False, policy="Square",
              threads=128, clear_accum=False) -> GemmPlan:
    """The plan, or GemmPlanError saying what does not fit."""
    key = tuple(dtypes)
    if key not in INSTRUCTIONS:
        supported = ", ".join("/".join(k) for k in INSTRUCTIONS)
        raise GemmPlanError(f"T.gemm: no mma.sync instruction for A/B/C dtypes "
                            f"{'/'.join(key)}; supported: {supported}")
    instr, kind, k_step = INSTRUCTIONS[key]
    if policy not in POLICIES:
        raise GemmPlanError(f"T.gemm: policy must be one of {POLICIES}, got {policy!r}")
    if threads % WARP:
        raise GemmPlanError(f"T.gemm needs whole warps, the block has {threads} threads")
    if K % k_step:
        raise GemmPlanError(f"T.gemm: K={K} must be a multiple of {k_step} for mma.{instr}")
    warps = threads // WARP
    fits = [(wm, wn) for wm, wn in _grids(warps) if M % (16 * wm) == 0 and N % (8 * wn) == 0]
    if not fits:
        raise GemmPlanError(f"T.gemm: a {M}x{N} tile cannot be split over {warps} warps in "
                            f"16x8 instruction tiles (M must be a multiple of 16·warps_m and N "
                            f"of 8·warps_n for some warps_m·warps_n = {warps})")
    if policy == "FullRow":
        wm, wn = max(fits, key=lambda g: g[0])
    elif policy == "FullCol":
        wm, wn = max(fits, key=lambda g: g[1])
    else:
        wm, wn = min(fits, key=lambda g: (abs((M // g[0]) - (N // g[1])), -g[0]))
    return GemmPlan(M, N, K, key, bool(transpose_A), bool(transpose_B), policy, threads,
                    wm, wn, instr, kind, k_step, bool(clear_accum))

"""How one ``T.gemm`` is spread over a block's warps: on ``mma.sync`` (sm_80+), on
Hopper's ``wgmma.mma_async`` (sm_90a), or on AMD's MFMA (gfx90a, gfx942: ``plan_mfma``).

The block's ``W = threads / 32`` warps form a ``warps_m x warps_n`` grid (warp
``w = wm + warps_m * wn``); each warp owns a ``(M / warps_m) x (N / warps_n)`` piece of C,
``repeat_m x repeat_n`` instruction tiles of 16 x 8. The policy picks the grid:
``FullRow`` puts every warp along M, ``FullCol`` along N, ``Square`` makes the warp's
piece as square as the divisibility rules allow. On MFMA the same fields count waves of
64 threads and the instruction tiles are 32 x 32 or 16 x 16.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from tilejit.ir.register_file import launch_registers
from tilejit.layouts import Fragment, Layout, mfma_fragment, mma_fragment, tile_fragment

WARP = 32

# (A dtype, B dtype, C dtype) -> (instruction, operand kind, k per instruction)
INSTRUCTIONS = {
    ("float16", "float16", "float32"): ("m16n8k16", "f16", 16),
    ("float16", "float16", "float16"): ("m16n8k16", "f16", 16),
    ("bfloat16", "bfloat16", "float32"): ("m16n8k16", "bf16", 16),
    ("float32", "float32", "float32"): ("m16n8k8", "tf32", 8),
    ("int8", "int8", "int32"): ("m16n8k32", "s8", 32),
    # float8 (sm_89+; on sm_90a wgmma where it takes the gemm)
    **{(a, b, "float32"): ("m16n8k32", a[7:], 32)
       for a in ("float8_e4m3", "float8_e5m2") for b in ("float8_e4m3", "float8_e5m2")},
}
FLOAT8_GEMMS = {k for k in INSTRUCTIONS if k[0].startswith("float8")}

POLICIES = ("Square", "FullRow", "FullCol")

# mma.sync kinds whose A operand held in registers has the instruction's own A layout (not
# the accumulator's over K): tf32's m16n8k8, int8's m16n8k32
A_OWN_LAYOUT = ("tf32", "s8")

# A/B/C dtypes no tensor-core instruction takes here, computed with one multiply-add per
# element and k by each thread (engine "fma", TileLang's SIMT gemm): C laid out as
# m16n8 accumulators over the warps, as mma.sync's float32 C is (any layout would do: no
# instruction reads it)
FMA = {("float64", "float64", "float64")}

WARPGROUP = 128
# wgmma.mma_async: (A dtype, B dtype, C dtype) -> (PTX type suffix, k per instruction).
# Only 16-bit operands may be stored MN-major (transpose_A, or B as (K, N)); the int8
# form reads both from shared memory K-major (A as (M, K), B as (N, K): transpose_B).
# float32 stays on mma.sync: wgmma reads tf32 operands from shared memory truncated,
# where the defined rounding (the simulator's, mma.sync's cvt.rna) is to nearest.
WGMMA = {
    ("float16", "float16", "float32"): ("f32.f16.f16", 16),
    ("float16", "float16", "float16"): ("f16.f16.f16", 16),
    ("bfloat16", "bfloat16", "float32"): ("f32.bf16.bf16", 16),
    ("int8", "int8", "int32"): ("s32.s8.s8", 32),
    # float8, fp32 accumulate, K-major like int8 (no transpose immediates)
    **{(a, b, "float32"): (f"f32.{a[7:]}.{b[7:]}", 32)
       for a in ("float8_e4m3", "float8_e5m2") for b in ("float8_e4m3", "float8_e5m2")},
}
# wgmma.mma_async.sp (a 2:4 sparse A, ``T.gemm_sp``): (A, B, C dtypes) -> (PTX type suffix,
# dense K per instruction); A is read compressed (K / 2 columns), B and C as dense
WGMMA_SPARSE = {
    ("float16", "float16", "float32"): ("f32.f16.f16", 32),
    ("float16", "float16", "float16"): ("f16.f16.f16", 32),
    ("bfloat16", "bfloat16", "float32"): ("f32.bf16.bf16", 32),
}
# the A/B/C dtypes T.gemm_sp takes on the sparse tensor cores (mma.sp on mma.sync's plan;
# WGMMA_SPARSE on wgmma's)
SPARSE_MMA = set(WGMMA_SPARSE)
ITEMSIZE = {"float16": 2, "bfloat16": 2, "int8": 1, "float8_e4m3": 1, "float8_e5m2": 1}

WAVE = 64
# MFMA (AMD CDNA2 gfx90a, CDNA3 gfx942/gfx950; AMD Matrix Instruction Calculator, LLVM's
# IntrinsicsAMDGPU.td): (A dtype, B dtype, C dtype) -> the instructions, preferred first,
# as (M x N x K, the suffix of llvm.amdgcn.mfma.*). The 32 x 32 forms do twice the work of
# the 16 x 16 ones per instruction on the same operand registers; a tile that does not
# split into them takes 16 x 16. int8 differs between the two generations: gfx90a has
# 32x32x8 / 16x16x16 (four bytes a lane), gfx942 replaced them by 32x32x16 / 16x16x32
# (eight; LLVM cannot select the older ones there and aborts). The simulator's meanings
# the lowering keeps: float32 operands rounded to TensorFloat-32 first (their products are
# then exact in the f32 instruction), a float16 accumulator rounded after every 16 of K
# (MFMA has no f16 accumulator: f32 registers, rounded in between).
_MFMA = {
    ("float16", "float16", "float32"): (("32x32x8", "f32.32x32x8f16"),
                                        ("16x16x16", "f32.16x16x16f16")),
    ("float16", "float16", "float16"): (("32x32x8", "f32.32x32x8f16"),
                                        ("16x16x16", "f32.16x16x16f16")),
    ("bfloat16", "bfloat16", "float32"): (("32x32x8", "f32.32x32x8bf16.1k"),
                                          ("16x16x16", "f32.16x16x16bf16.1k")),
    ("float32", "float32", "float32"): (("32x32x2", "f32.32x32x2f32"),
                                        ("16x16x4", "f32.16x16x4f32")),
}
_MFMA_INT8 = {"gfx90a": (("32x32x8", "i32.32x32x8i8"), ("16x16x16", "i32.16x16x16i8")),
              "gfx942": (("32x32x16", "i32.32x32x16.i8"), ("16x16x32", "i32.16x16x32.i8")),
              "gfx950": (("32x32x16", "i32.32x32x16.i8"), ("16x16x32", "i32.16x16x32.i8"))}


def mfma_instructions(dtypes, arch: str):
    """The MFMA instructions of ``arch`` for these A/B/C dtypes, preferred first (empty
    where there is none)."""
    key = tuple(dtypes)
    if key in _MFMA:
        return _MFMA[key]
    if key == ("int8", "int8", "int32"):
        return _MFMA_INT8.get(arch, ())
    return ()


def mfma_dtypes(arch: str) -> list[str]:
    """The A/B/C dtype combinations T.gemm takes on ``arch``, as text."""
    keys = list(_MFMA) + ([("int8", "int8", "int32")] if arch in _MFMA_INT8 else [])
    return ["/".join(k) for k in keys]


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
    engine: str = "mma"      # "mma" (mma.sync), "wgmma" (see with_wgmma), "mfma" (plan_mfma),
    #                          "fma" (plan_fma: no tensor-core instruction, SIMT)
    # wgmma only: each operand's shared layout as (swizzle bytes, columns per swizzle
    # atom, rows, columns) of the tile (ir/smem_layouts.canonical_layout), None for A
    # in registers
    a_smem: tuple | None = None
    b_smem: tuple | None = None
    # an operand that is a region of a shared tile (T.gemm(A_s[:, 32:], ...),
    # frontend/gemm_operands.py): the (row, col) of the region's first element in its
    # tile, which the lowering adds to every address; (0, 0) for a whole tile
    a_origin: tuple[int, int] = (0, 0)
    b_origin: tuple[int, int] = (0, 0)
    # T.gemm_sp on the sparse tensor cores: A is the compressed (M, K / 2) tile and the
    # gemm's fifth operand is the metadata E (language/sparse.py); K is the dense K
    sparse: bool = False
    transpose_E: bool = False       # the sparse gemm's E stored (K / e_factor, M)

    @property
    def warpgroups_m(self) -> int:
        return self.warps_m // 4

    @property
    def warpgroups_n(self) -> int:
        return self.warps_n

    @property
    def warp_m(self) -> int:
        return self.M // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.N // self.warps_n

    @property
    def instr_mn(self) -> tuple[int, int]:
        """M x N of one instruction's accumulator tile: 16 x 8 (mma.sync, wgmma's m16n8
        blocks), 32 x 32 or 16 x 16 (MFMA)."""
        if self.engine == "mfma":
            m, n, _ = self.instr.split("x")
            return int(m), int(n)
        return 16, 8

    @property
    def repeat_m(self) -> int:
        return self.warp_m // self.instr_mn[0]

    @property
    def repeat_n(self) -> int:
        return self.warp_n // self.instr_mn[1]

    def c_fragment(self):
        """The accumulator's layout: warps_m x warps_n warps, each repeat_m x repeat_n
        m16n8 accumulator tiles (on wgmma, ``wgmma_fragment``; on MFMA, waves of 64 lanes
        each holding repeat_m x repeat_n accumulators of the instruction issued with A
        and B swapped, ``mfma_fragment(instr, "CT")``: a lane holds part of a row)."""
        if self.engine == "wgmma":
            return wgmma_fragment(self.warpgroups_m, self.warpgroups_n, self.repeat_m,
                                  self.repeat_n)
        if self.engine == "mfma":
            return tile_fragment(mfma_fragment(self.instr, "CT"), self.warps_m, self.warps_n,
                                 self.repeat_m, self.repeat_n)
        return tile_fragment(mma_fragment(self.instr, self.kind, "C"), self.warps_m,
                             self.warps_n, self.repeat_m, self.repeat_n)

    def a_fragment(self):
        """The layout an A operand held in registers must have: the accumulator layout
        of an M x K tile on warps_m warps (a m16n8kX A operand holds the same elements
        per thread as the m16n8 accumulators over its K columns), copied on each of the
        warps_n warp columns (on wgmma: the wgmma accumulator layout of M x K, copied on
        each warpgroup column). With ``transpose_A`` the fragment holds A^T (K x M): the
        same layout transposed, each element at the slot its transpose has there."""
        frag = self._a_fragment_of_a()
        return frag.transposed() if self.transpose_A else frag

    def _a_fragment_of_a(self):
        if self.engine == "wgmma":
            base = wgmma_fragment(self.warpgroups_m, 1, self.repeat_m, self.K // 8)
            return base.replicated(self.warps_n) if self.warps_n > 1 else base
        if self.engine == "mfma":      # the swapped accumulator over K (see mfma_fragment)
            base = tile_fragment(mfma_fragment(self.instr, "CT"), self.warps_m, 1,
                                 self.repeat_m, self.K // self.instr_mn[1])
            return base.replicated(self.warps_n) if self.warps_n > 1 else base
        # tf32's m16n8k8 A operand is not the accumulator's layout (a thread holds
        # columns t and t + 4, not 2t and 2t + 1), nor is int8's m16n8k32 (four
        # consecutive columns a register): their own fragment, tiled over K by k steps
        if self.kind in A_OWN_LAYOUT:
            base = tile_fragment(mma_fragment(self.instr, self.kind, "A"), self.warps_m, 1,
                                 self.repeat_m, self.K // self.k_step)
            return base.replicated(self.warps_n) if self.warps_n > 1 else base
        base = tile_fragment(mma_fragment(self.instr, self.kind, "C"), self.warps_m, 1,
                             self.repeat_m, self.K // 8)
        return base.replicated(self.warps_n) if self.warps_n > 1 else base

    def __str__(self) -> str:
        t = ("A^T " if self.transpose_A else "A ") + ("B^T" if self.transpose_B else "B")
        if self.sparse:
            t += " E^T" if self.transpose_E else " E"
        for name, origin in (("A", self.a_origin), ("B", self.b_origin)):
            if origin != (0, 0):
                t += f" ({name} at {origin})"
        if self.engine == "wgmma":
            a = "registers" if self.a_smem is None else self.a_smem
            return (f"{self.M}x{self.N}x{self.K} {'/'.join(self.dtypes)} {t} policy="
                    f"{self.policy}: wgmma{'.sp' if self.sparse else ''}"
                    f".m64n{self.warp_n}k{self.k_step}, "
                    f"{self.warpgroups_m}x{self.warpgroups_n} warpgroups, each "
                    f"{self.repeat_m} x m64 (A {a}, B {self.b_smem})")
        if self.engine == "mfma":
            return (f"{self.M}x{self.N}x{self.K} {'/'.join(self.dtypes)} {t} policy="
                    f"{self.policy}: mfma.{self.kind}, {self.warps_m}x{self.warps_n} waves, "
                    f"each {self.warp_m}x{self.warp_n} = {self.repeat_m}x{self.repeat_n} "
                    f"tiles")
        return (f"{self.M}x{self.N}x{self.K} {'/'.join(self.dtypes)} {t} policy={self.policy}: "
                f"{'mma.sp.m16n8k32' if self.sparse else 'mma.' + self.instr}.{self.kind}, "
                f"{self.warps_m}x"
                f"{self.warps_n} warps, each "
                f"{self.warp_m}x{self.warp_n} = {self.repeat_m}x{self.repeat_n} tiles")


def _grids(warps: int):
    return [(wm, warps // wm) for wm in range(1, warps + 1) if warps % wm == 0]


def plan_gemm(M, N, K, dtypes, transpose_A=False, transpose_B=False, policy="Square",
              threads=128, clear_accum=False) -> GemmPlan:
    """The plan, or GemmPlanError saying what does not fit."""
    key = tuple(dtypes)
    if key in FMA:
        return plan_fma(M, N, K, key, transpose_A, transpose_B, policy, threads, clear_accum)
    if key not in INSTRUCTIONS:
        supported = ", ".join("/".join(k) for k in sorted(INSTRUCTIONS) + sorted(FMA))
        raise GemmPlanError(f"T.gemm: no mma.sync instruction for A/B/C dtypes "
                            f"{'/'.join(key)}; supported: {supported}")
    instr, kind, k_step = INSTRUCTIONS[key]
    _check_policy_and_warps(policy, threads)
    if K % k_step:
        raise GemmPlanError(f"T.gemm: K={K} must be a multiple of {k_step} for mma.{instr}")
    wm, wn = _warp_grid(M, N, threads, policy, f"a {M}x{N} tile", "instruction tiles")
    return GemmPlan(M, N, K, key, bool(transpose_A), bool(transpose_B), policy, threads,
                    wm, wn, instr, kind, k_step, bool(clear_accum))


def plan_fma(M, N, K, dtypes, transpose_A=False, transpose_B=False, policy="Square",
             threads=128, clear_accum=False) -> GemmPlan:
    """A gemm of ``FMA``'s dtypes (engine ``"fma"``): C in the m16n8 accumulator layout
    over ``threads`` (32-thread groups; on AMDGPU too, where nothing wave-wide reads
    it), each thread's elements computed with multiply-adds over K from shared memory."""
    _check_policy_and_warps(policy, threads)
    wm, wn = _warp_grid(M, N, threads, policy, f"a {M}x{N} {'/'.join(dtypes)} tile", "pieces")
    return GemmPlan(M, N, K, tuple(dtypes), bool(transpose_A), bool(transpose_B), policy,
                    threads, wm, wn, "m16n8k16", "f16", 1, bool(clear_accum), engine="fma")


def _check_policy_and_warps(policy, threads):
    if policy not in POLICIES:
        raise GemmPlanError(f"T.gemm: policy must be one of {POLICIES}, got {policy!r}")
    if threads % WARP:
        raise GemmPlanError(f"T.gemm needs whole warps, the block has {threads} threads")


def _warp_grid(M, N, threads, policy, what, unit):
    """(warps_m, warps_n) splitting an M x N C into 16 x 8 ``unit``s over the block's
    warps, as ``policy`` prefers, or GemmPlanError naming ``what`` cannot be split."""
    warps = threads // WARP
    fits = [(wm, wn) for wm, wn in _grids(warps) if M % (16 * wm) == 0 and N % (8 * wn) == 0]
    if not fits:
        raise GemmPlanError(f"T.gemm: No valid warp partition: {what} cannot be split over "
                            f"{warps} warps in 16x8 {unit} "
                            f"(M must be a multiple of 16·warps_m and N of 8·warps_n for some "
                            f"warps_m·warps_n = {warps})")
    return _choose_grid(fits, policy, M, N)


def _choose_grid(fits, policy, M, N):
    if policy == "FullRow":
        return max(fits, key=lambda g: g[0])
    if policy == "FullCol":
        return max(fits, key=lambda g: g[1])
    return min(fits, key=lambda g: (abs((M // g[0]) - (N // g[1])), -g[0]))


def plan_mfma(M, N, K, dtypes, transpose_A=False, transpose_B=False, policy="Square",
              threads=256, clear_accum=False, arch="gfx942", a_in_registers=False) -> GemmPlan:
    """The plan on AMD's MFMA for ``arch`` (engine ``"mfma"``), or GemmPlanError saying
    what does not fit. The block's ``threads / 64`` waves form the grid (``warps_m x
    warps_n`` count waves); each wave owns ``repeat_m x repeat_n`` instruction tiles of
    the first instruction (32 x 32 before 16 x 16) whose tiles split the block's C over
    some grid and whose K divides the gemm's (with A in registers, whose N does too: the
    A fragment is the swapped accumulator over K, ``GemmPlan.a_fragment``)."""
    key = tuple(dtypes)
    choices = mfma_instructions(key, arch)
    if not choices:
        raise GemmPlanError(f"T.gemm: no MFMA instruction on {arch} for A/B/C dtypes "
                            f"{'/'.join(key)}; supported: {', '.join(mfma_dtypes(arch))}")
    if policy not in POLICIES:
        raise GemmPlanError(f"T.gemm: policy must be one of {POLICIES}, got {policy!r}")
    if threads % WAVE:
        raise GemmPlanError(f"T.gemm on AMDGPU needs whole waves of 64 threads, the block "
                            f"has {threads} threads")
    waves = threads // WAVE
    rounding = 16 if key[2] == "float16" else 1     # a float16 C: rounded every 16 of K
    for shape, name in choices:
        m, n, k = (int(x) for x in shape.split("x"))
        if K % k or K % rounding or (a_in_registers and K % n):
            continue
        fits = [(wm, wn) for wm, wn in _grids(waves) if M % (m * wm) == 0 and N % (n * wn) == 0]
        if fits:
            wm, wn = _choose_grid(fits, policy, M, N)
            return GemmPlan(M, N, K, key, bool(transpose_A), bool(transpose_B), policy,
                            threads, wm, wn, shape, name, k, bool(clear_accum), engine="mfma")
    tiles = " or ".join(s.rsplit("x", 1)[0] for s, _ in choices)
    ks = " or ".join(f"{max(int(s.rsplit('x', 1)[1]), rounding)}"
                     + (f" and {s.split('x')[1]}" if a_in_registers else "") for s, _ in choices)
    raise GemmPlanError(f"T.gemm: a {M}x{N}x{K} gemm does not fit MFMA on {arch}: C must split "
                        f"over the block's {waves} waves in {tiles} instruction tiles (M a "
                        f"multiple of the tile's M·waves_m, N of its N·waves_n for some "
                        f"waves_m·waves_n = {waves}) with K a multiple of {ks}")


def wgmma_fragment(groups_m: int, groups_n: int, slices: int, n_blocks: int) -> Fragment:
    """The accumulator layout of wgmma.m64nNk*: a ``groups_m x groups_n`` grid of
    warpgroups (warpgroup ``g = gm + groups_m * gn``), each owning ``slices`` m64 row
    slices of ``N = 8 * n_blocks`` columns. Within a slice, warp ``w`` of the warpgroup
    holds rows ``16 w ...`` as the m16n8 accumulator tiles of mma.sync, one per n block:
    element ``(i0 + 16 w + 64 rm + 64 slices gm, j0 + 8 rn + 8 n_blocks gn)`` is at
    thread ``t(i0, j0) + 32 w + 128 g`` and slot ``s(i0, j0) + 4 (rn + n_blocks rm)``,
    i.e. register ``d[4 rn + s]`` of slice ``rm``'s instruction (PTX ISA, "Register
    Fragments" of wgmma's D matrix)."""
    base = mma_fragment("m16n8k16", "f16", "C")
    t, s = base.thread_layout, base.slot_layout
    thread = Layout(((t[0].shape, 4, slices, groups_m), (t[1].shape, n_blocks, groups_n)),
                    ((t[0].stride, 32, 0, WARPGROUP), (t[1].stride, 0, WARPGROUP * groups_m)))
    slot = Layout(((s[0].shape, 4, slices, groups_m), (s[1].shape, n_blocks, groups_n)),
                  ((s[0].stride, 0, 4 * n_blocks, 0), (s[1].stride, 4, 0)))
    return Fragment((64 * slices * groups_m, 8 * n_blocks * groups_n), thread, slot,
                    WARPGROUP * groups_m * groups_n,
                    name=f"wgmma C x warpgroups {groups_m}x{groups_n} x {slices} slices "
                         f"x n{8 * n_blocks}")


def with_wgmma(gp: GemmPlan, a_smem, b_smem, a_shape=None, b_shape=None) -> GemmPlan | None:
    """``gp`` on wgmma.mma_async, or None where wgmma cannot take it (the mma.sync plan
    stays). ``a_smem``/``b_smem``: the operands' shared layouts as ``(swizzle bytes,
    columns per atom)`` (``ir/smem_layouts.canonical_layout``), None where the tile's
    layout is not one wgmma reads; ``a_smem`` is ignored for A in registers
    (``a_in_registers``). ``a_shape``/``b_shape``: the tiles' shapes where an operand
    is a region of its tile (the gemm's operand shapes otherwise)."""
    return _wgmma(gp, a_smem, b_smem, False, a_shape, b_shape)


def with_wgmma_rs(gp: GemmPlan, b_smem, b_shape=None) -> GemmPlan | None:
    """As ``with_wgmma``, A held in registers."""
    return _wgmma(gp, None, b_smem, True, None, b_shape)


def _atom_aligned(origin, mn_major: bool, width: int, k_step: int) -> bool:
    """Whether a region starting at ``origin`` (row, col) of its tile keeps a wgmma
    descriptor valid: its start is the start of an 8-row group of the swizzle pattern
    (so the base offset stays 0 and SBO/LBO keep the tile's strides) and, along the
    atom's columns, on an atom boundary (MN-major) or on a k step inside the atom
    (K-major: the same start-address move the k steps make)."""
    row, col = origin
    if mn_major:                        # rows are k, columns m or n
        return row % 8 == 0 and col % width == 0
    return row % 8 == 0 and col % k_step == 0


# what a wgmma needs beside its accumulator registers (descriptors, addresses, the
# loop): ptxas asked 138 registers for a 112-word accumulator
WGMMA_REGISTER_OVERHEAD = 32


def _wgmma_registers(gp) -> int:
    """The registers a thread needs for the gemm's wgmma: its whole accumulator (the
    instructions of all its repeats are live together; wgmma's accumulator cannot spill,
    ptxas refuses it) and the overhead."""
    words = gp.M * gp.N * (4 if gp.dtypes[2] in ("float32", "int32") else 2) // 4
    return -(-words // gp.threads) + WGMMA_REGISTER_OVERHEAD


def _wgmma(gp, a_smem, b_smem, a_regs, a_shape=None, b_shape=None):
    table = WGMMA_SPARSE if gp.sparse else WGMMA
    if gp.dtypes not in table or gp.threads % WARPGROUP or b_smem is None:
        return None
    if not a_regs and a_smem is None:
        return None
    if gp.sparse and (a_regs or gp.transpose_A or gp.a_origin != (0, 0)):
        return None             # the sparse A: a whole K-major tile in shared memory
    _, k_step = table[gp.dtypes]
    if gp.K % k_step:
        return None
    size = ITEMSIZE[gp.dtypes[0]]
    if size != 2 and (a_regs or gp.transpose_A or not gp.transpose_B):
        return None             # 8-bit operands: both K-major in shared memory
    # the compressed A holds half of each k step's columns
    a_k = k_step // 2 if gp.sparse else k_step
    for smem, mn_major, origin, k in (
            (None if a_regs else a_smem, gp.transpose_A, gp.a_origin, a_k),
            (b_smem, not gp.transpose_B, gp.b_origin, k_step)):
        if smem is None:
            continue
        swizzle, width = smem
        if swizzle not in (32, 64, 128):
            return None
        if not mn_major and k * size > swizzle:
            return None
        if not _atom_aligned(origin, mn_major, width, k):
            return None
    groups = gp.threads // WARPGROUP
    fits = []
    for gm in range(1, groups + 1):
        if groups % gm:
            continue
        gn = groups // gm
        n = gp.N // gn if gp.N % gn == 0 else 0
        if gp.M % (64 * gm) or n == 0 or n % 8 or n > 256:
            continue
        if gp.kind == "s8" and n > 24 and n % 16:
            continue            # integer wgmma's N: 8, 16, 24, then multiples of 16
        if not gp.transpose_B and n % b_smem[1]:
            continue
        fits.append((gm, gn))
    if not fits:
        return None
    if _wgmma_registers(gp) > launch_registers(gp.threads):
        return None             # the accumulator cannot stay in registers: mma.sync spills
    if gp.policy == "FullCol":
        gm, gn = max(fits, key=lambda g: g[1])
    else:                   # the widest instruction N is the fastest (FullRow, Square)
        gm, gn = max(fits, key=lambda g: g[0])
    a_cols = gp.K // 2 if gp.sparse else gp.K
    rows_a = tuple(a_shape or ((a_cols, gp.M) if gp.transpose_A else (gp.M, a_cols)))
    rows_b = tuple(b_shape or ((gp.N, gp.K) if gp.transpose_B else (gp.K, gp.N)))
    return replace(gp, engine="wgmma", warps_m=4 * gm, warps_n=gn, k_step=k_step,
                   instr=f"m64n{gp.N // gn}k{k_step}",
                   a_smem=None if a_regs else (*a_smem, *rows_a), b_smem=(*b_smem, *rows_b))

"""Register fragments: which thread holds which element of a tile, and where.

A ``Fragment`` maps every element ``(i, j)`` of a tile to ``(thread, slot)``:
the thread whose registers hold it and the index among that thread's local
values.  Both halves are ``Layout``s over the tile coordinate, so the MMA
fragments of the PTX ISA (and AMD's MFMA ones, ``mfma_fragment``) are written down
directly from their formulas.

Worked example -- the m16n8k16 accumulator (PTX ISA 9.7.14.5.8, "Matrix
Fragments for mma.m16n8k16 with floating point type"), with
``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``::

    row = groupID + 8 * (i >= 2)        col = threadID_in_group * 2 + (i & 1)

Split ``row = r0 + 8*r1`` and ``col = c0 + 2*c1``; then ``lane = 4*r0 + c1``
and ``slot i = c0 + 2*r1``, i.e. two layouts over the shape
``((8,2),(2,4))``::

    >>> C = MMA_M16N8K16_F16_C
    >>> print(C.thread_layout)
    ((8,2),(2,4)):((4,0),(0,1))
    >>> print(C.slot_layout)
    ((8,2),(2,4)):((0,2),(1,0))
    >>> [C.inverse()(0, s) for s in range(4)]           # lane 0 holds
    [(0, 0), (0, 1), (8, 0), (8, 1)]
    >>> C(9, 5)                                          # -> (lane, slot)
    (6, 3)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

from tilejit.layouts.layout import Layout, composition, is_int, make_layout

WARP_SIZE = 32


@dataclass(frozen=True)
class Fragment:
    """Tile element -> (thread, slot), with optional replication.

    ``thread_layout`` and ``slot_layout`` are layouts whose top-level modes
    have the tile's extents.  With ``replicate = r > 1`` each element is held by
    ``r`` threads: ``thread_of(i, j) + k * (num_threads // r)`` for ``k < r``,
    all at the same slot.
    """

    shape: tuple[int, ...]
    thread_layout: Layout
    slot_layout: Layout
    num_threads: int
    replicate: int = 1
    name: str = ""

    def __post_init__(self) -> None:
        shape = (self.shape,) if is_int(self.shape) else tuple(self.shape)
        if not shape or not all(is_int(x) and x > 0 for x in shape):
            raise ValueError(f"Fragment: expected a tuple of positive ints as shape, "
                             f"got {self.shape!r}")
        object.__setattr__(self, "shape", shape)
        for what, lay in (("thread_layout", self.thread_layout), ("slot_layout", self.slot_layout)):
            if not isinstance(lay, Layout):
                raise ValueError(f"Fragment: expected a Layout as {what}, got {lay!r}")
            extents = tuple(m.size for m in lay) if lay.rank == len(shape) else None
            if extents != shape:
                raise ValueError(f"Fragment: expected {what} modes with extents {shape}, got {lay}")
        if not is_int(self.replicate) or self.replicate < 1:
            raise ValueError(f"Fragment: expected replicate >= 1, got {self.replicate!r}")
        if not is_int(self.num_threads) or self.num_threads % self.replicate:
            raise ValueError(f"Fragment: expected num_threads to be a multiple of replicate="
                             f"{self.replicate}, got {self.num_threads!r}")
        if self.thread_layout.cosize > self.base_threads:
            raise ValueError(f"Fragment: expected thread ids < {self.base_threads}, got thread "
                             f"layout {self.thread_layout} reaching "
                             f"{self.thread_layout.cosize - 1}")

    @property
    def base_threads(self) -> int:
        """Threads holding copy 0 of the tile: ``num_threads // replicate``."""
        return self.num_threads // self.replicate

    @property
    def slots_per_thread(self) -> int:
        return self.slot_layout.cosize

    def _coord(self, index: tuple) -> int | tuple[int, ...]:
        if len(index) == 1 and isinstance(index[0], tuple):
            index = index[0]
        if len(index) != len(self.shape) or not all(is_int(x) for x in index):
            raise IndexError(f"Fragment {self.name!r}: expected {len(self.shape)} int indices, "
                             f"got {index!r}")
        for x, n in zip(index, self.shape):
            if not 0 <= x < n:
                raise IndexError(f"Fragment {self.name!r}: expected an index inside shape "
                                 f"{self.shape}, got {index}")
        return index[0] if len(index) == 1 else index

    def thread_of(self, *index) -> int:
        """The thread holding copy 0 of element ``index``."""
        return self.thread_layout(self._coord(index))

    def threads_of(self, *index) -> tuple[int, ...]:
        """All ``replicate`` threads holding element ``index``."""
        t = self.thread_of(*index)
        return tuple(t + k * self.base_threads for k in range(self.replicate))

    def slot_of(self, *index) -> int:
        return self.slot_layout(self._coord(index))

    def __call__(self, *index) -> tuple[int, int]:
        """``(thread, slot)`` of element ``index`` (copy 0)."""
        c = self._coord(index)
        return self.thread_layout(c), self.slot_layout(c)

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Every element index of the tile, row-major."""
        def rec(prefix: tuple[int, ...], dims: tuple[int, ...]):
            if not dims:
                yield prefix
                return
            for x in range(dims[0]):
                yield from rec(prefix + (x,), dims[1:])
        return rec((), self.shape)

    def inverse(self) -> FragmentInverse:
        """``(thread, slot) -> index``; raises ValueError if two elements collide."""
        table: dict[tuple[int, int], tuple[int, ...]] = {}
        for idx in self.indices():
            key = self(*idx)
            if key in table:
                raise ValueError(f"Fragment {self.name!r}: expected distinct (thread, slot) per "
                                 f"element, got {key} for both {table[key]} and {idx}")
            table[key] = idx
        return FragmentInverse(self, MappingProxyType(table))

    def transposed(self) -> Fragment:
        """The 2-D distribution of the transposed tile: element ``(j, i)`` held where
        this one holds ``(i, j)``, at the same slot (a T.gemm's A operand in registers
        stored as A^T, ``transpose_A``)."""
        if len(self.shape) != 2:
            raise ValueError(f"Fragment.transposed: expected a 2-D fragment, got shape "
                             f"{self.shape}")

        def swap(lay):
            return Layout((lay[1].shape, lay[0].shape), (lay[1].stride, lay[0].stride))
        return Fragment((self.shape[1], self.shape[0]), swap(self.thread_layout),
                        swap(self.slot_layout), self.num_threads, self.replicate,
                        f"{self.name} transposed")

    def replicated(self, copies: int) -> Fragment:
        """The same distribution held ``copies`` times by disjoint thread groups."""
        if not is_int(copies) or copies < 1:
            raise ValueError(f"Fragment.replicated: expected a positive int, got {copies!r}")
        return Fragment(self.shape, self.thread_layout, self.slot_layout,
                        self.num_threads * copies, self.replicate * copies,
                        f"{self.name} x{copies} copies")


@dataclass(frozen=True, eq=False)
class FragmentInverse:
    """``(thread, slot) -> element index`` of a Fragment (replicas included)."""

    fragment: Fragment
    table: Mapping[tuple[int, int], tuple[int, ...]]

    def get(self, thread: int, slot: int, default=None):
        if not 0 <= thread < self.fragment.num_threads:
            return default
        return self.table.get((thread % self.fragment.base_threads, slot), default)

    def __call__(self, thread: int, slot: int) -> tuple[int, ...]:
        idx = self.get(thread, slot)
        if idx is None:
            raise KeyError(f"Fragment {self.fragment.name!r}: thread {thread} holds no slot {slot}")
        return idx

    def __len__(self) -> int:
        return len(self.table) * self.fragment.replicate


# -- mma.sync fragments (PTX ISA 9.7.14.5, "Matrix multiply-accumulate operation
# using mma instruction"; section numbers as in PTX ISA 8.x).  Notation of the
# ISA: groupID = laneid >> 2, threadID_in_group = laneid % 4, and the fragment
# element index i (a_i, b_i, c_i) is our slot.  In every layout below the
# thread strides are 4 for groupID and 1 for threadID_in_group.

def _mma(name: str, shape: tuple[int, int], modes, thread_stride, slot_stride) -> Fragment:
    return Fragment(shape, Layout(modes, thread_stride), Layout(modes, slot_stride), WARP_SIZE,
                    name=name)


# PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type"
# (.f16 / .bf16; four .f16x2 registers a0..a7 for A, two for B).
# A 16x16 (row): row = groupID + 8*((i >> 1) & 1); col = threadID_in_group*2 + (i & 1) + 8*(i >= 4)
#   row = g + 8*r1, col = c0 + 2*tig + 8*c2  ->  slot = c0 + 2*r1 + 4*c2.
MMA_M16N8K16_F16_A = _mma("mma.m16n8k16.f16 A", (16, 16), ((8, 2), (2, 4, 2)),
                          ((4, 0), (0, 1, 0)), ((0, 2), (1, 0, 4)))
# B 16x8 (col, K x N): row = threadID_in_group*2 + (i & 1) + 8*(i >= 2); col = groupID
MMA_M16N8K16_F16_B = _mma("mma.m16n8k16.f16 B", (16, 8), ((2, 4, 2), 8),
                          ((0, 1, 0), 4), ((1, 0, 2), 0))
# C/D 16x8 (.f32 c0..c3, or two .f16x2 for an f16 accumulator):
#   row = groupID + 8*(i >= 2); col = threadID_in_group*2 + (i & 1)
MMA_M16N8K16_F16_C = _mma("mma.m16n8k16 C (f32)", (16, 8), ((8, 2), (2, 4)),
                          ((4, 0), (0, 1)), ((0, 2), (1, 0)))

# PTX ISA 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8" (.tf32: one element per .b32).
# A 16x8: row = groupID + 8*(i in {1, 3}); col = threadID_in_group + 4*(i >= 2)
#   -> slot = r1 + 2*c1 (note a1 is the +8 row, unlike the f16 ordering).
MMA_M16N8K8_TF32_A = _mma("mma.m16n8k8.tf32 A", (16, 8), ((8, 2), (4, 2)),
                          ((4, 0), (1, 0)), ((0, 1), (0, 2)))
# B 8x8: row = threadID_in_group + 4*i; col = groupID
MMA_M16N8K8_TF32_B = _mma("mma.m16n8k8.tf32 B", (8, 8), ((4, 2), 8), ((1, 0), 4), ((0, 1), 0))
# C/D 16x8 .f32: same formula as m16n8k16.
MMA_M16N8K8_TF32_C = _mma("mma.m16n8k8.tf32 C (f32)", (16, 8), ((8, 2), (2, 4)),
                          ((4, 0), (0, 1)), ((0, 2), (1, 0)))

# PTX ISA 9.7.14.5.10 "Matrix Fragments for mma.m16n8k32" (.s8/.u8: four per .b32).
# A 16x32: row = groupID + 8*((i >> 2) & 1); col = threadID_in_group*4 + (i & 3) + 16*(i >= 8)
#   row = g + 8*r1, col = c0 + 4*tig + 16*c2  ->  slot = c0 + 4*r1 + 8*c2.
MMA_M16N8K32_INT8_A = _mma("mma.m16n8k32.s8 A", (16, 32), ((8, 2), (4, 4, 2)),
                           ((4, 0), (0, 1, 0)), ((0, 4), (1, 0, 8)))
# B 32x8: row = threadID_in_group*4 + (i & 3) + 16*(i >= 4); col = groupID
MMA_M16N8K32_INT8_B = _mma("mma.m16n8k32.s8 B", (32, 8), ((4, 4, 2), 8),
                           ((0, 1, 0), 4), ((1, 0, 4), 0))
# C/D 16x8 .s32: same formula as the f32 accumulator.
MMA_M16N8K32_INT8_C = _mma("mma.m16n8k32.s8 C (s32)", (16, 8), ((8, 2), (2, 4)),
                           ((4, 0), (0, 1)), ((0, 2), (1, 0)))

_MMA = {
    ("m16n8k16", "f16"): (MMA_M16N8K16_F16_A, MMA_M16N8K16_F16_B, MMA_M16N8K16_F16_C),
    ("m16n8k16", "bf16"): (MMA_M16N8K16_F16_A, MMA_M16N8K16_F16_B, MMA_M16N8K16_F16_C),
    ("m16n8k8", "tf32"): (MMA_M16N8K8_TF32_A, MMA_M16N8K8_TF32_B, MMA_M16N8K8_TF32_C),
    ("m16n8k32", "s8"): (MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K32_INT8_C),
    ("m16n8k32", "u8"): (MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K32_INT8_C),
    ("m16n8k32", "int8"): (MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K32_INT8_C),
    # sm_89's .e4m3/.e5m2 forms hold four 8-bit values a register as .s8 does (the f32
    # C as the 16-bit forms' C); tilejit plans float8 gemms with them and runs them on
    # wgmma (sm_90a)
    ("m16n8k32", "e4m3"): (MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K16_F16_C),
    ("m16n8k32", "e5m2"): (MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K16_F16_C),
}


def mma_fragment(instr: str, dtype: str, operand: str) -> Fragment:
    """The warp fragment of one mma.sync operand::

        >>> mma_fragment("m16n8k16", "bf16", "A").slots_per_thread
        8
    """
    ops = {"A": 0, "B": 1, "C": 2, "D": 2}
    key = (instr, dtype)
    if key not in _MMA or operand not in ops:
        raise ValueError(f"mma_fragment: expected (instr, dtype) in {sorted(_MMA)} and operand in "
                         f"A/B/C/D, got {key!r} and {operand!r}")
    return _MMA[key][ops[operand]]


# -- MFMA fragments: AMD CDNA2 (gfx90a) and CDNA3 (gfx942) matrix cores, one wave of 64
# lanes per instruction. Source: AMD Matrix Instruction Calculator
# (github.com/ROCm/amd_matrix_instruction_calculator, ``matrix_calculator.py -a cdna3 -i
# v_mfma_f32_32x32x8_f16 -d``, "Register to matrix element mapping with no modifiers"; the
# same formulas for cdna2 and for every instruction below). For an M x N x K instruction
# (M = N = 32 or 16) let G = 64 / M lane groups and KL = K / G elements per lane, ``e`` the
# element's index in the lane's A (B) operand (``2 * GPR_num + GPR_bits / 16`` for 16-bit
# types, ``4 * GPR_num + GPR_bits / 8`` for int8, 0 for f32) and ``r`` the accumulator
# register (``GPR_num``):
#   A[i][k] (M x K):  i = lane % M,  k = KL * (lane // M) + e
#   B[k][j] (K x N):  j = lane % N,  k = KL * (lane // N) + e
#   C/D[i][j]:        j = lane % N,  i = 4 * G * (r // 4) + 4 * (lane // N) + r % 4
# (the calculator's "(8 * floor(GPR_num / 4) % 32) + 4 * floor(lane / 32) + (GPR_num % 4)"
# for 32 x 32, "4 * floor(lane / 16) + (GPR_num % 4)" for 16 x 16). The instructions
# (LLVM's llvm.amdgcn.mfma.*: IntrinsicsAMDGPU.td): f16 32x32x8 / 16x16x16, bf16
# 32x32x8_1k / 16x16x16_1k (KL = 4 everywhere), int8 32x32x8 / 16x16x16 on gfx90a (KL = 4,
# an i32 of four bytes) and 32x32x16 / 16x16x32 on gfx942 (KL = 8, an i64), f32 32x32x2 /
# 16x16x4 (KL = 1).

WAVE_SIZE = 64


def _mfma_fragments(m: int, k: int) -> dict[str, Fragment]:
    g = WAVE_SIZE // m
    kl = k // g
    name = f"mfma {m}x{m}x{k}"
    # A: i = i0 (lane i0), k = e + kl*g0 (slot e, lane + m*g0)
    a = Fragment((m, k), Layout((m, (kl, g)), (1, (0, m))), Layout((m, (kl, g)), (0, (1, 0))),
                 WAVE_SIZE, name=f"{name} A")
    b = Fragment((k, m), Layout(((kl, g), m), ((0, m), 1)), Layout(((kl, g), m), ((1, 0), 0)),
                 WAVE_SIZE, name=f"{name} B")
    # C: i = r0 + 4*g0 + 4*G*r1 with r = r0 + 4*r1; j = lane % N
    rows = (4, g, m // (4 * g)) if m > 4 * g else (4, g)
    t_rows = (0, m, 0) if m > 4 * g else (0, m)
    s_rows = (1, 0, 4) if m > 4 * g else (1, 0)
    c = Fragment((m, m), Layout((rows, m), (t_rows, 1)), Layout((rows, m), (s_rows, 0)),
                 WAVE_SIZE, name=f"{name} C")
    # the accumulator of the instruction issued with its operands swapped (B^T as its A,
    # A^T as its B): element (i, j) of the product is D[j][i], so lane % N is the row
    ct = Fragment((m, m), Layout((m, (rows)), (1, (t_rows))), Layout((m, rows), (0, s_rows)),
                  WAVE_SIZE, name=f"{name} C^T (operands swapped)")
    return {"A": a, "B": b, "C": c, "D": c, "CT": ct}


# (M, K) of the instruction -> its fragments
_MFMA = {(m, k): _mfma_fragments(m, k)
         for m, k in ((32, 8), (16, 16), (32, 16), (16, 32), (32, 2), (16, 4))}


def mfma_fragment(shape: str, operand: str) -> Fragment:
    """The wave fragment of one MFMA operand, ``shape`` as ``"32x32x8"`` (M x N x K):
    ``A``, ``B``, ``C``/``D``, or ``CT``, the accumulator of the instruction issued with A
    and B swapped (``T.gemm``'s accumulator on AMDGPU: each lane holds part of a row)::

        >>> C = mfma_fragment("32x32x8", "C")
        >>> C.slots_per_thread, C(5, 3), C(12, 3)      # (lane, register)
        (16, (35, 1), (35, 4))
        >>> mfma_fragment("32x32x8", "CT")(3, 12)
        (35, 4)
        >>> [mfma_fragment("16x16x16", "A").inverse()(17, e) for e in range(4)]
        [(1, 4), (1, 5), (1, 6), (1, 7)]
    """
    dims = shape.split("x") if isinstance(shape, str) else ()
    key = (int(dims[0]), int(dims[2])) if len(dims) == 3 and dims[0] == dims[1] and all(
        d.isdigit() for d in dims) else None
    if key not in _MFMA or operand not in _MFMA[key]:
        raise ValueError(f"mfma_fragment: expected a shape in "
                         f"{sorted(f'{m}x{m}x{k}' for m, k in _MFMA)} and operand in A/B/C/D/CT, "
                         f"got {shape!r} and {operand!r}")
    return _MFMA[key][operand]


def tile_fragment(base: Fragment, warps_m: int, warps_n: int,
                  repeat_m: int = 1, repeat_n: int = 1) -> Fragment:
    """A block-level fragment: a ``warps_m x warps_n`` grid of warps, each owning
    a contiguous ``repeat_m x repeat_n`` grid of ``base`` tiles.

    With base tile ``M x N`` split ``i = i0 + M*rm + M*repeat_m*wm`` (same for
    j), warp ``w = wm + warps_m*wn`` (m fastest, like CuTe) and
    ``thread = base.thread + W*w`` (``W`` the base's threads: 32, or a wave of 64 for
    MFMA), ``slot = base.slot + V*(rm + repeat_m*rn)`` with ``V = base.slots_per_thread``.
    A 128x128 f32 accumulator on 4 warps, each warp a 64x64 sub-tile of 4x8 m16n8 tiles::

        >>> F = tile_fragment(MMA_M16N8K16_F16_C, 2, 2, 4, 8)
        >>> F.shape, F.num_threads, F.slots_per_thread
        ((128, 128), 128, 128)
        >>> F(64 + 9, 5)                 # warp 1, lane 6, slot 3
        (38, 3)
    """
    counts = (warps_m, warps_n, repeat_m, repeat_n)
    if not all(is_int(x) and x > 0 for x in counts):
        raise ValueError(f"tile_fragment: expected positive ints, got {counts!r}")
    if len(base.shape) != 2 or base.replicate != 1:
        raise ValueError(f"tile_fragment: expected a 2-D unreplicated base fragment, got "
                         f"shape {base.shape} with replicate={base.replicate}")
    t, v = base.base_threads, base.slots_per_thread

    def grow(lay: Layout, m_strides: tuple[int, int], n_strides: tuple[int, int]) -> Layout:
        return Layout(((lay[0].shape, repeat_m, warps_m), (lay[1].shape, repeat_n, warps_n)),
                      ((lay[0].stride, *m_strides), (lay[1].stride, *n_strides)))

    m, n = base.shape
    return Fragment((m * repeat_m * warps_m, n * repeat_n * warps_n),
                    grow(base.thread_layout, (0, t), (0, t * warps_m)),
                    grow(base.slot_layout, (v, 0), (v * repeat_m, 0)),
                    t * warps_m * warps_n,
                    name=f"{base.name} x warps {warps_m}x{warps_n} x repeat {repeat_m}x{repeat_n}")


def parallel_fragment(shape, threads: int, vector: int = 1) -> Fragment:
    """The T.Parallel distribution: flatten the tile row-major, cut it into
    chunks of ``vector`` consecutive elements, deal chunks round-robin to
    ``threads`` threads.

    Algebra: over the row-major flat index ``f = v + vector*(t + threads*k)``,
    ``thread = (vector,threads,K):(0,1,0)`` and ``slot = (vector,threads,K):(1,0,vector)``;
    composing each with the row-major layout of ``shape`` gives layouts over
    ``(i, j)``.  When that composition does not exist (chunks straddle rows in
    a non-affine way) a ValueError says so::

        >>> P = parallel_fragment((4, 64), threads=32, vector=4)
        >>> P(0, 4), P(1, 0), P(2, 5)
        ((1, 0), (16, 0), (1, 5))
    """
    dims = (shape,) if is_int(shape) else tuple(shape)
    if not dims or not all(is_int(x) and x > 0 for x in dims):
        raise ValueError(f"parallel_fragment: expected a shape of positive ints, got {shape!r}")
    if not (is_int(threads) and threads > 0 and is_int(vector) and vector > 0):
        raise ValueError(f"parallel_fragment: expected positive threads and vector, got "
                         f"threads={threads!r}, vector={vector!r}")
    rounds = -(-math.prod(dims) // (threads * vector))
    row_major = make_layout(dims, order="row")
    try:
        tl = composition(Layout((vector, threads, rounds), (0, 1, 0)), row_major)
        sl = composition(Layout((vector, threads, rounds), (1, 0, vector)), row_major)
    except ValueError as e:
        raise ValueError(f"parallel_fragment: expected a shape whose row-major chunks of "
                         f"{vector} over {threads} threads form a layout, got shape {dims}: {e}"
                         ) from None
    return Fragment(dims, tl, sl, threads,
                    name=f"parallel {dims} threads={threads} vector={vector}")


def row_groups_fragment(shape, group: int, threads: int) -> Fragment | None:
    """A 2-d tile's rows dealt to groups of ``group`` threads (row r to group r mod
    groups; as many groups as the block has, a power of two that divides the rows),
    each row's elements round-robin over its group's threads; the block's other
    threads, if any, hold replicas."""
    if len(shape) != 2:
        return None
    rows, cols = shape
    groups = threads // group
    while groups > 1 and rows % groups:
        groups //= 2
    if groups < 2:
        return None
    per_row, per_group = cols // group, rows // groups
    # (unit modes left out: the digit form reads each mode as a digit)
    row_mode, row_thread, row_slot = ((groups, group, 0) if per_group == 1 else
                                      ((groups, per_group), (group, 0), (0, per_row)))
    col_mode, col_thread, col_slot = ((group, 1, 0) if per_row == 1 else
                                      ((group, per_row), (1, 0), (0, 1)))
    thread = Layout((row_mode, col_mode), (row_thread, col_thread))
    slot = Layout((row_mode, col_mode), (row_slot, col_slot))
    frag = Fragment(tuple(shape), thread, slot, groups * group,
                    name=f"rows {tuple(shape)} to {groups} groups of {group} threads")
    copies = threads // (groups * group)
    return frag if copies == 1 else frag.replicated(copies)

"""The MFMA fragments (AMD CDNA2 gfx90a / CDNA3 gfx942) against the formulas of AMD's
Matrix Instruction Calculator, written here independently of ``layouts/fragment.py`` and
in the other direction: ``matrix_calculator.py -a cdna3 -i <instruction> -d``, "Matrix
element to register mapping with no modifiers" gives, for an element, its lane and the
GPR and bits holding it; the element's index in the lane's operand vector is
``GPR * (32 / bits) + low bit / bits``."""
from __future__ import annotations

import pytest

from tilejit.layouts import WAVE_SIZE, mfma_fragment, tile_fragment


def a_or_b_ref(shape: str, mn: int, k: int) -> tuple[int, int]:
    """(lane, element) of A[mn][k] (or B[k][mn]): the calculator's formulas."""
    if shape in ("32x32x8",):          # f16, bf16_1k (2 GPRs of 2), gfx90a i8 (1 GPR of 4)
        return 32 * (k // 4) + mn, k % 4
    if shape == "16x16x16":            # f16, bf16_1k; gfx90a i8
        return 16 * (k // 4) + mn, k % 4
    if shape == "32x32x16":            # gfx942 i8: GPR (k / 4) % 2, bits 8 * (k % 4)
        return 32 * (k // 8) + mn, 4 * ((k // 4) % 2) + k % 4
    if shape == "16x16x32":            # gfx942 i8
        return 16 * (k // 8) + mn, 4 * ((k // 4) % 2) + k % 4
    if shape == "32x32x2":             # f32: one GPR
        return 32 * k + mn, 0
    if shape == "16x16x4":
        return 16 * k + mn, 0
    raise AssertionError(shape)


def d_ref(shape: str, i: int, j: int) -> tuple[int, int]:
    """(lane, GPR) of C/D[i][j]."""
    if shape.startswith("32x32"):
        return (32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4
    return 16 * (i // 4) + j, i % 4


SHAPES = ["32x32x8", "16x16x16", "32x32x16", "16x16x32", "32x32x2", "16x16x4"]


@pytest.mark.parametrize("shape", SHAPES)
def test_mfma_operands_match_the_calculator(shape):
    m, n, k = (int(x) for x in shape.split("x"))
    per_lane = m * k // WAVE_SIZE
    A, B = mfma_fragment(shape, "A"), mfma_fragment(shape, "B")
    assert A.shape == (m, k) and B.shape == (k, n)
    assert A.num_threads == B.num_threads == 64
    assert A.slots_per_thread == B.slots_per_thread == per_lane
    for i in range(m):
        for kk in range(k):
            assert A(i, kk) == a_or_b_ref(shape, i, kk)
            assert B(kk, i) == a_or_b_ref(shape, i, kk)
    # every (lane, element) exactly once
    assert len(A.inverse()) == len(B.inverse()) == 64 * per_lane


@pytest.mark.parametrize("shape", SHAPES)
def test_mfma_accumulator_matches_the_calculator(shape):
    m = int(shape.split("x")[0])
    C, CT = mfma_fragment(shape, "C"), mfma_fragment(shape, "CT")
    assert C.slots_per_thread == CT.slots_per_thread == m * m // 64
    for i in range(m):
        for j in range(m):
            assert C(i, j) == d_ref(shape, i, j)
            assert CT(i, j) == d_ref(shape, j, i)        # operands swapped: D = (A B)^T
    assert len(C.inverse()) == m * m


def test_swapped_accumulator_is_the_a_operand_over_k():
    """T.gemm's accumulator on AMDGPU (the swapped C) holds, for each k step of 8 (16)
    columns, exactly the elements the lane's A operand of 32x32x8 (16x16x16) needs:
    FlashAttention's P goes from one gemm into the next without moving."""
    for shape, steps in (("32x32x8", 4), ("16x16x16", 1)):
        m, _, k = (int(x) for x in shape.split("x"))
        CT, A = mfma_fragment(shape, "CT"), mfma_fragment(shape, "A")
        for step in range(steps):
            for i in range(m):
                for kk in range(k):
                    lane, e = A(i, kk)
                    assert CT(i, step * k + kk) == (lane, 4 * step + e)


def test_known_points():
    A = mfma_fragment("32x32x8", "A")
    assert [A.inverse()(33, e) for e in range(4)] == [(1, 4), (1, 5), (1, 6), (1, 7)]
    C = mfma_fragment("32x32x8", "C")
    assert [C.inverse()(32, r) for r in (0, 3, 4, 15)] == [(4, 0), (7, 0), (12, 0), (31, 0)]
    assert mfma_fragment("16x16x16", "C").inverse()(63, 3) == (15, 15)
    with pytest.raises(ValueError, match="32x32x8"):
        mfma_fragment("32x16x8", "A")
    with pytest.raises(ValueError, match="CT"):
        mfma_fragment("32x32x8", "E")


def test_wave_tiled_accumulator():
    """2 x 1 waves, each 2 x 4 swapped 32x32 accumulators: element (i, j) is in wave
    i // 64, lane i % 32 + 32 * ((j // 4) % 2), register (j % 4) + 4 * ((j % 32) // 8) of
    accumulator (rm, rn) = ((i % 64) // 32, j // 32), slot 16 * (rm + 2 * rn) + register."""
    F = tile_fragment(mfma_fragment("32x32x8", "CT"), 2, 1, 2, 4)
    assert F.shape == (128, 128) and F.num_threads == 128 and F.slots_per_thread == 128
    for i in range(128):
        for j in range(128):
            wave, rm, rn = i // 64, (i % 64) // 32, j // 32
            lane = i % 32 + 32 * ((j // 4) % 2)
            reg = j % 4 + 4 * ((j % 32) // 8)
            assert F(i, j) == (64 * wave + lane, 16 * (rm + 2 * rn) + reg)

"""Property tests for tilejit.layouts: layout algebra, swizzles, fragments."""
from __future__ import annotations

import dataclasses
import doctest
import importlib
import itertools
import math
import random
import sys

import pytest

from tilejit.layouts import (MMA_M16N8K8_TF32_A, MMA_M16N8K8_TF32_B, MMA_M16N8K8_TF32_C,
                             MMA_M16N8K16_F16_A, MMA_M16N8K16_F16_B, MMA_M16N8K16_F16_C,
                             MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B, MMA_M16N8K32_INT8_C,
                             ComposedLayout, Fragment, Layout, Swizzle, coalesce, complement,
                             composition, concat, flatten, left_inverse, logical_divide,
                             logical_product, make_layout, make_swizzled_layout, mma_fragment,
                             offset_table, parallel_fragment, plot_fragment, right_inverse,
                             swizzle_for_bytes, tile_fragment, zipped_divide)

# ---------------------------------------------------------------------------
# deterministic generators of small layouts


def _nest(rng: random.Random, items: list):
    """Randomly group a flat list into a nested tuple (keeping leaf order)."""
    if len(items) == 1:
        return items[0]
    groups, i = [], 0
    while i < len(items):
        k = rng.randint(1, min(3, len(items) - i))
        groups.append(items[i:i + k] if k > 1 and rng.random() < 0.5 else items[i:i + 1])
        i += len(groups[-1])
    return tuple(g[0] if len(g) == 1 else tuple(g) for g in groups)


def _make(rng: random.Random, shapes: list[int], strides: list[int]) -> Layout:
    """Layout from flat leaves with a random (shared) nesting."""
    pairs = list(zip(shapes, strides))
    nested = _nest(rng, pairs)

    def part(t, k):
        return t[k] if isinstance(t[0], int) else tuple(part(x, k) for x in t)
    return Layout(part(nested, 0), part(nested, 1))


def _leaves(rng: random.Random, max_size: int, choices=(1, 2, 3, 4, 6)) -> list[int]:
    out, size = [], 1
    for _ in range(rng.randint(1, 4)):
        s = rng.choice(choices)
        if size * s > max_size:
            break
        out.append(s)
        size *= s
    return out or [rng.choice(choices[1:])]


def random_layouts(seed: int, n: int, max_size: int = 48) -> list[Layout]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        shapes = _leaves(rng, max_size)
        strides = [rng.choice((0, 1, 1, 2, 3, 4, 5, 8, 12)) for _ in shapes]
        out.append(_make(rng, shapes, strides))
    return out


def pow2_layouts(seed: int, n: int, max_size: int = 64) -> list[Layout]:
    """Power-of-two extents and strides: composition always exists."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        shapes = _leaves(rng, max_size, choices=(1, 2, 4, 8))
        strides = [rng.choice((0, 1, 2, 4, 8, 16)) for _ in shapes]
        out.append(_make(rng, shapes, strides))
    return out


def injective_layouts(seed: int, n: int, max_size: int = 48, choices=(2, 3, 4)):
    """(A, total): A = a subset of the modes of a compact layout (in random
    order, random nesting) of ``total`` elements; A is injective and has a
    well-defined complement."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        shapes = [s for s in _leaves(rng, max_size, choices=choices) if s > 1]
        order = list(range(len(shapes)))
        rng.shuffle(order)
        strides, acc = [0] * len(shapes), 1
        for i in order:
            strides[i] = acc
            acc *= shapes[i]
        keep = rng.sample(range(len(shapes)), rng.randint(1, len(shapes)))
        a = _make(rng, [shapes[i] for i in keep], [strides[i] for i in keep])
        out.append((a, acc))
    return out


def images(layout, n=None) -> list[int]:
    return [layout(i) for i in range(layout.size if n is None else n)]


# ---------------------------------------------------------------------------
# Layout basics


def test_doctests():
    for name in ("layout", "swizzle", "fragment"):
        mod = importlib.import_module(f"tilejit.layouts.{name}")
        result = doctest.testmod(mod)
        assert result.failed == 0 and result.attempted > 0, name


def test_layout_call_colexicographic():
    L = Layout((4, (2, 3)), (1, (40, 100)))
    assert L.size == 24 and L.rank == 2 and L.depth == 2
    assert L.cosize == 1 + 3 + 40 + 200
    for i in range(24):
        c0, rest = i % 4, i // 4
        c1, c2 = rest % 2, rest // 2
        assert L(i) == c0 + 40 * c1 + 100 * c2
        assert L(c0, rest) == L((c0, (c1, c2))) == L(i)
    assert L[1].shape == (2, 3) and L[1, 0] == Layout(2, 40)
    assert [str(m) for m in L] == ["4:1", "(2,3):(40,100)"]
    assert str(L[1:]) == "((2,3)):((40,100))"


def test_make_layout_orders():
    assert make_layout((2, 3, 4)) == Layout((2, 3, 4), (1, 2, 6))
    assert make_layout((2, 3, 4), order="row") == Layout((2, 3, 4), (12, 4, 1))
    assert make_layout((2, (3, 4)), order="row") == Layout((2, (3, 4)), (12, (4, 1)))
    assert make_layout([4, 2], [2, 1]) == Layout((4, 2), (2, 1))
    assert Layout(8) == Layout(8, 1)


def test_layout_is_immutable_and_hashable():
    L = Layout((4, 2), (2, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        L.shape = (8,)
    assert len({L, Layout((4, 2), (2, 1)), Layout((4, 2))}) == 2


@pytest.mark.parametrize("args, needle", [
    (((2, 3), (1,)), "congruent"),
    (((2, 0), (1, 2)), "positive"),
    (((2, 3), (1, -2)), "non-negative"),
    ((("a", 3), (1, 2)), "expected an int"),
    (((), ()), "non-empty"),
])
def test_layout_rejects_bad_inputs(args, needle):
    with pytest.raises(ValueError, match=needle):
        Layout(*args)


def test_layout_bad_coordinates():
    L = Layout((4, 2))
    with pytest.raises(ValueError, match="congruent"):
        L((1, 2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        L(-1)
    with pytest.raises(ValueError, match="order"):
        make_layout((2, 2), order="diag")


# ---------------------------------------------------------------------------
# algebra properties at every index


@pytest.mark.parametrize("seed", range(4))
def test_coalesce_preserves_function(seed):
    for a in random_layouts(seed, 150) + pow2_layouts(seed, 50):
        c = coalesce(a)
        assert c.size == a.size
        assert c.rank <= len(flatten(a)._leaves) and c.depth <= 1
        assert images(c) == images(a), (str(a), str(c))
        assert coalesce(c) == c


def test_coalesce_examples():
    assert coalesce(Layout((2, (1, 6)), (1, (7, 2)))) == Layout(12, 1)
    assert coalesce(Layout((2, 3), (0, 0))) == Layout(6, 0)
    assert coalesce(Layout((1, 1), (3, 4))) == Layout(1, 0)
    assert coalesce(Layout((4, 3), (1, 5))) == Layout((4, 3), (1, 5))


@pytest.mark.parametrize("seed", range(4))
def test_composition_pow2(seed):
    # power-of-two extents/strides and a B with disjoint modes: always composable
    As = pow2_layouts(100 + seed, 60)
    Bs = [b for b, _ in injective_layouts(200 + seed, 60, 64, choices=(2, 4, 8))]
    for a, b in zip(As, Bs):
        r = composition(a, b)
        assert r.size == b.size
        assert images(r) == [a(b(i)) for i in range(b.size)], (str(a), str(b), str(r))


@pytest.mark.parametrize("seed", range(4))
def test_composition_general(seed):
    # arbitrary A and B: either the exact composition or a ValueError
    ok = failed = 0
    pairs = itertools.product(random_layouts(300 + seed, 30) + pow2_layouts(300 + seed, 10),
                              random_layouts(400 + seed, 10) + pow2_layouts(400 + seed, 10))
    for a, b in pairs:
        try:
            r = composition(a, b)
        except ValueError as e:
            assert "expected" in str(e)
            failed += 1
            continue
        ok += 1
        assert images(r) == [a(b(i)) for i in range(b.size)], (str(a), str(b), str(r))
    assert ok > 300 and failed > 20


def test_composition_by_mode_and_errors():
    A = make_layout((8, 12), order="row")
    r = composition(A, (Layout(4, 2), 3))
    assert r.shape == (4, 3)
    assert all(r(i, j) == A(2 * i, j) for i in range(4) for j in range(3))
    assert composition(A, (None, 6)) == Layout((8, 6), (12, 1))
    with pytest.raises(ValueError, match="expected the stride"):
        composition(Layout((4, 3), (1, 10)), Layout(2, 3))
    with pytest.raises(ValueError, match="multiple of 2"):
        composition(Layout((4, 3), (1, 10)), Layout(3, 2))
    with pytest.raises(ValueError, match="rank"):
        composition(Layout(8), (2, 2))
    # overlapping modes of B: fine on a linear (single-mode) A, rejected otherwise
    r = composition(Layout(16, 2), Layout((4, 4), (1, 1)))
    assert images(r) == [2 * (i % 4 + i // 4) for i in range(16)]
    with pytest.raises(ValueError, match="disjoint"):
        composition(Layout((4, 4), (8, 16)), Layout((8, 8), (1, 1)))


@pytest.mark.parametrize("seed", range(4))
def test_complement_fills_the_gaps(seed):
    for a, total in injective_layouts(500 + seed, 60):
        for k in (1, 2, 3):
            bound = total * k
            c = complement(a, bound)
            ia, ic = images(a), images(c)
            assert set(ia) & set(ic) == {0}
            assert sorted(images(concat(a, c))) == list(range(bound)), (str(a), str(c), bound)
            assert c.size * a.size == bound


def test_complement_examples_and_errors():
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    assert complement(Layout((2, 2), (1, 6)), 24) == Layout((3, 2), (2, 12))
    assert complement(Layout(4, 1), 4) == Layout(1, 0)
    with pytest.raises(ValueError, match="multiple"):
        complement(Layout((2, 2), (1, 3)), 12)
    with pytest.raises(ValueError, match="cosize_bound"):
        complement(Layout(2, 1), 0)


@pytest.mark.parametrize("seed", range(4))
def test_logical_divide_agrees_with_composition(seed):
    rng = random.Random(600 + seed)
    ok = 0
    for a, _ in injective_layouts(700 + seed, 80):
        tile, _ = injective_layouts(rng.randint(0, 10**6), 1, max_size=a.size)[0]
        try:
            d = logical_divide(a, tile)
        except ValueError:
            continue
        ok += 1
        full = concat(tile, complement(tile, a.size))
        assert images(d) == [a(full(i)) for i in range(full.size)]
        assert images(d[0]) == [a(tile(i)) for i in range(tile.size)]
        if sorted(images(full)) == list(range(a.size)):
            assert sorted(images(d)) == sorted(images(a))
    assert ok > 40


def test_logical_and_zipped_divide_by_mode():
    A = make_layout((8, 12), order="row")
    D = logical_divide(A, (2, Layout(3, 4)))
    assert D[0] == logical_divide(A[0], 2) and D[1] == logical_divide(A[1], Layout(3, 4))
    Z = zipped_divide(A, (2, 4))
    for i0, j0, i1, j1 in itertools.product(range(2), range(4), range(4), range(3)):
        assert Z((i0, j0), (i1, j1)) == A(i0 + 2 * i1, j0 + 4 * j1)
    assert Layout(((2, 2), (2, 3)), ((4, 1), (2, 8))) == logical_divide(
        Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))


@pytest.mark.parametrize("seed", range(3))
def test_logical_product_repeats_the_tile(seed):
    ok = 0
    for (a, _), (b, _) in zip(injective_layouts(800 + seed, 60, 16),
                                  injective_layouts(900 + seed, 60, 8)):
        try:
            p = logical_product(a, b)
        except ValueError:  # e.g. the complement's modes cannot hold B's extents
            continue
        ok += 1
        assert p.size == a.size * b.size
        assert images(p[0]) == images(a)
        if sorted(images(a)) == list(range(a.size)) and sorted(images(b)) == list(range(b.size)):
            assert sorted(images(p)) == list(range(p.size))
    assert ok > 30


@pytest.mark.parametrize("seed", range(3))
def test_right_inverse(seed):
    for a in random_layouts(1000 + seed, 150) + pow2_layouts(1000 + seed, 50):
        r = right_inverse(a)
        assert [a(r(i)) for i in range(r.size)] == list(range(r.size)), (str(a), str(r))
    assert right_inverse(Layout((4, 8), (8, 1))) == Layout((8, 4), (4, 1))
    assert right_inverse(Layout(4, 2)) == Layout(1, 0)


@pytest.mark.parametrize("seed", range(3))
def test_left_inverse(seed):
    for a, _ in injective_layouts(1100 + seed, 80):
        inv = left_inverse(a)
        assert [inv(a(i)) for i in range(a.size)] == list(range(a.size)), (str(a), str(inv))
    with pytest.raises(ValueError, match="injective"):
        left_inverse(Layout((2, 2), (1, 0)))
    with pytest.raises(ValueError, match="injective"):
        left_inverse(Layout((2, 2), (1, 1)))


# ---------------------------------------------------------------------------
# swizzles


def bank_group(elem_offset: int, dtype_bytes: int) -> int:
    """16-byte bank group (4 banks of 4 bytes) within a 128-byte line."""
    return (elem_offset * dtype_bytes // 16) % 8


@pytest.mark.parametrize("bits, base, shift", [
    (b, m, s) for b in range(4) for m in range(4) for s in (b, b + 1, 4, -b, -4) if abs(s) >= b
])
def test_swizzle_is_bijection(bits, base, shift):
    sw = Swizzle(bits, base, shift)
    assert sw.yyy_mask & sw.zzz_mask == 0
    n = sw.period
    for block in (0, 3):
        dom = range(block * n, (block + 1) * n)
        assert sorted(sw(x) for x in dom) == list(dom)
    assert all(sw(sw(x)) == x for x in range(2 * n))


def test_swizzle_rejects_overlapping_masks():
    with pytest.raises(ValueError, match="shift"):
        Swizzle(3, 0, 2)
    with pytest.raises(ValueError, match="row_bytes"):
        swizzle_for_bytes(48)


def test_swizzle_for_bytes():
    assert swizzle_for_bytes(128) == Swizzle(3, 3, 3)
    assert swizzle_for_bytes(64) == Swizzle(2, 3, 3)
    assert swizzle_for_bytes(32) == Swizzle(1, 3, 3)
    assert swizzle_for_bytes(128, dtype_bytes=4) == Swizzle(3, 2, 3)
    assert swizzle_for_bytes(128, dtype_bytes=1) == Swizzle(3, 4, 3)


def test_swizzle_64x64_fp16_tile_bijection():
    tile = ComposedLayout(Swizzle(3, 3, 3), 0, make_layout((64, 64), order="row"))
    offsets = [tile(i, j) for i in range(64) for j in range(64)]
    assert sorted(offsets) == list(range(64 * 64))
    assert tile.cosize == 4096 and tile.size == 4096


def ldmatrix_conflict_free(layout, rows: int, cols: int, dtype_bytes: int) -> bool:
    """Every ldmatrix phase (8 aligned rows x one 16-byte chunk) hits 8 distinct
    bank groups, and each 16-byte row piece is contiguous and aligned."""
    vec = 16 // dtype_bytes
    for r0 in range(0, rows - 7, 8):
        for c0 in range(0, cols, vec):
            starts = []
            for r in range(r0, r0 + 8):
                offs = [layout(r, c) for c in range(c0, c0 + vec)]
                if offs != list(range(offs[0], offs[0] + vec)) or offs[0] % vec:
                    return False
                starts.append(bank_group(offs[0], dtype_bytes))
            if len(set(starts)) != 8:
                return False
    return True


@pytest.mark.parametrize("rows, cols, dtype_bytes, expect", [
    (64, 64, 2, Swizzle(3, 3, 3)),
    (64, 128, 2, Swizzle(3, 3, 3)),
    (32, 32, 2, Swizzle(2, 3, 3)),
    (16, 16, 2, Swizzle(1, 3, 3)),
    (16, 48, 2, Swizzle(1, 3, 3)),
    (32, 32, 4, Swizzle(3, 2, 3)),
    (16, 128, 1, Swizzle(3, 4, 3)),
    (12, 64, 2, Swizzle(3, 3, 3)),
    (64, 8, 2, None),
    (12, 128, 2, None),
])
def test_make_swizzled_layout(rows, cols, dtype_bytes, expect):
    L = make_swizzled_layout((rows, cols), dtype_bytes)
    if expect is None:
        assert isinstance(L, Layout) and L == make_layout((rows, cols), order="row")
    else:
        assert isinstance(L, ComposedLayout) and L.swizzle == expect
    offsets = [L(i, j) for i in range(rows) for j in range(cols)]
    assert sorted(offsets) == list(range(rows * cols))
    if expect is not None or cols * dtype_bytes <= 16:
        assert ldmatrix_conflict_free(L, rows, cols, dtype_bytes)


def test_unswizzled_wide_rows_conflict():
    # The checker itself: a plain 128-byte-row tile is an 8-way conflict.
    assert not ldmatrix_conflict_free(make_layout((64, 64), order="row"), 64, 64, 2)
    with pytest.raises(ValueError, match="rows, cols"):
        make_swizzled_layout((64,), 2)


def _table_by_calls(layout, shape):
    return [layout(*c) for c in itertools.product(*(range(n) for n in shape))]


@pytest.mark.parametrize("seed", range(3))
def test_offset_table_is_the_layout_at_every_coordinate(seed):
    """offset_table (the layout evaluated on numpy arrays a mode at a time) gives what
    calling the layout gives: flat indices for a 1-d shape, one int per mode otherwise,
    past a mode's size too (its last leaf extends), through a swizzle and an offset."""
    rng = random.Random(seed)
    cases = []
    for L in random_layouts(seed, 12):
        cases.append((L, (L.size,)))
        cases.append((L, (L.size + 3,)))
        if L.rank >= 2:
            cases.append((L, tuple(m.size + rng.randrange(2) for m in L)))
    for rows, cols in ((64, 64), (128, 32), (8, 64), (16, 8), (128, 128), (12, 64)):
        for itemsize in (1, 2, 4):
            cases.append((make_swizzled_layout((rows, cols), itemsize), (rows, cols)))
    cases.append((ComposedLayout(Swizzle(2, 0, -3), 5, Layout((8, 8), (8, 1))), (8, 8)))
    cases.append((ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1))), (512,)))
    for L, shape in cases:
        table = offset_table(L, shape)
        assert table.shape == shape and table.dtype.name == "int64"
        assert table.ravel().tolist() == _table_by_calls(L, shape), (str(L), shape)
    # anything else callable is evaluated element by element
    table = offset_table(lambda i, j: 3 * i + j, (2, 3))
    assert table.tolist() == [[0, 1, 2], [3, 4, 5]]


# ---------------------------------------------------------------------------
# fragments


def ptx_ref(kind: str, lane: int, i: int) -> tuple[int, int]:
    """Element (row, col) of fragment element i held by lane, from the PTX ISA
    "Matrix Fragments for mma.m16n8k*" formulas."""
    g, t = lane >> 2, lane % 4
    if kind == "f16_A":
        return g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >= 4)
    if kind == "f16_B":
        return t * 2 + (i & 1) + 8 * (i >= 2), g
    if kind == "C":
        return g + 8 * (i >= 2), t * 2 + (i & 1)
    if kind == "tf32_A":
        return g + 8 * (i in (1, 3)), t + 4 * (i >= 2)
    if kind == "tf32_B":
        return t + 4 * i, g
    if kind == "s8_A":
        return g + 8 * ((i >> 2) & 1), t * 4 + (i & 3) + 16 * (i >= 8)
    if kind == "s8_B":
        return t * 4 + (i & 3) + 16 * (i >= 4), g
    raise AssertionError(kind)


MMA_CASES = [
    (MMA_M16N8K16_F16_A, "f16_A", (16, 16), 8),
    (MMA_M16N8K16_F16_B, "f16_B", (16, 8), 4),
    (MMA_M16N8K16_F16_C, "C", (16, 8), 4),
    (MMA_M16N8K8_TF32_A, "tf32_A", (16, 8), 4),
    (MMA_M16N8K8_TF32_B, "tf32_B", (8, 8), 2),
    (MMA_M16N8K8_TF32_C, "C", (16, 8), 4),
    (MMA_M16N8K32_INT8_A, "s8_A", (16, 32), 16),
    (MMA_M16N8K32_INT8_B, "s8_B", (32, 8), 8),
    (MMA_M16N8K32_INT8_C, "C", (16, 8), 4),
]


@pytest.mark.parametrize("frag, kind, shape, slots", MMA_CASES,
                         ids=[c[0].name for c in MMA_CASES])
def test_mma_fragment_matches_ptx(frag, kind, shape, slots):
    assert frag.shape == shape and frag.num_threads == 32 and frag.replicate == 1
    assert frag.slots_per_thread == slots
    seen = {}
    for i, j in frag.indices():
        seen[frag(i, j)] = (i, j)
    # every element exactly once, every (lane, slot) distinct and in range
    assert len(seen) == shape[0] * shape[1] == 32 * slots
    assert set(seen) == {(lane, s) for lane in range(32) for s in range(slots)}
    inv = frag.inverse()
    for lane in range(32):
        for s in range(slots):
            assert inv(lane, s) == ptx_ref(kind, lane, s)
            assert frag(*ptx_ref(kind, lane, s)) == (lane, s)


def test_mma_known_points():
    C, A, B = MMA_M16N8K16_F16_C, MMA_M16N8K16_F16_A, MMA_M16N8K16_F16_B
    assert [C.inverse()(0, s) for s in range(4)] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    assert [C.inverse()(31, s) for s in range(4)] == [(7, 6), (7, 7), (15, 6), (15, 7)]
    a = A.inverse()
    assert a(5, 0) == (1, 2) and a(5, 1) == (1, 3)          # row 1, cols 2..3
    assert a(5, 2) == (9, 2) and a(5, 4) == (1, 10) and a(5, 7) == (9, 11)
    assert B.inverse()(5, 0) == (2, 1) and B.inverse()(5, 3) == (11, 1)
    assert A.thread_of(15, 15) == 31 and A.slot_of(15, 15) == 7
    assert MMA_M16N8K8_TF32_A.inverse()(0, 1) == (8, 0)
    assert MMA_M16N8K32_INT8_A.inverse()(1, 8) == (0, 20)


def test_mma_fragment_lookup():
    assert mma_fragment("m16n8k16", "bf16", "A") is MMA_M16N8K16_F16_A
    assert mma_fragment("m16n8k32", "s8", "D") is MMA_M16N8K32_INT8_C
    assert mma_fragment("m16n8k8", "tf32", "B") is MMA_M16N8K8_TF32_B
    with pytest.raises(ValueError, match="m16n8k16"):
        mma_fragment("m8n8k4", "f16", "A")


def test_tile_fragment_128x128_accumulator():
    base = MMA_M16N8K16_F16_C
    F = tile_fragment(base, warps_m=2, warps_n=2, repeat_m=4, repeat_n=8)
    assert F.shape == (128, 128) and F.num_threads == 128 and F.slots_per_thread == 128
    seen = set()
    for i, j in F.indices():
        t, s = F(i, j)
        seen.add((t, s))
        warp, lane = divmod(t, 32)
        # warp w = wm + 2*wn owns the 64x64 sub-tile (wm, wn)
        assert (i // 64, j // 64) == (warp % 2, warp // 2)
        assert lane == base.thread_of(i % 16, j % 8)
        assert s % 4 == base.slot_of(i % 16, j % 8)
        assert s // 4 == (i % 64) // 16 + 4 * ((j % 64) // 8)
    assert seen == {(t, s) for t in range(128) for s in range(128)}
    assert len(F.inverse()) == 128 * 128


def test_tile_fragment_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        tile_fragment(MMA_M16N8K16_F16_C, 0, 1)
    with pytest.raises(ValueError, match="unreplicated"):
        tile_fragment(MMA_M16N8K16_F16_C.replicated(2), 1, 1)


def parallel_ref(shape, threads, vector, idx):
    f = 0
    for x, n in zip(idx, shape):
        f = f * n + x
    chunk = f // vector
    return chunk % threads, (chunk // threads) * vector + f % vector


@pytest.mark.parametrize("shape, threads, vector", [
    ((4, 64), 32, 4), ((64, 64), 128, 8), ((16, 8), 32, 2), ((128,), 64, 1),
    ((8, 4), 32, 8), ((3, 4), 32, 1), ((6, 16), 32, 4), ((2, 4, 8), 16, 2), ((96,), 32, 1),
])
def test_parallel_fragment(shape, threads, vector):
    P = parallel_fragment(shape, threads, vector)
    assert P.num_threads == threads and P.shape == shape
    seen = set()
    for idx in P.indices():
        assert P(*idx) == parallel_ref(shape, threads, vector, idx)
        seen.add(P(*idx))
    assert len(seen) == math.prod(shape)
    inv = P.inverse()
    assert all(inv(*P(*idx)) == idx for idx in P.indices())


def test_parallel_fragment_not_a_layout():
    with pytest.raises(ValueError, match="form a layout"):
        parallel_fragment((3, 6), 4, 2)
    with pytest.raises(ValueError, match="positive"):
        parallel_fragment((4, 4), 0)


def test_fragment_replicate_and_validation():
    P = parallel_fragment((8, 8), 32, 2).replicated(4)
    assert P.replicate == 4 and P.num_threads == 128 and P.base_threads == 32
    assert P.threads_of(0, 2) == (1, 33, 65, 97)
    inv = P.inverse()
    assert inv(97, 0) == inv(1, 0) == (0, 2)
    assert inv.get(200, 0) is None
    with pytest.raises(KeyError):
        inv(0, 5)
    with pytest.raises(IndexError):
        P.thread_of(8, 0)
    with pytest.raises(ValueError, match="extents"):
        Fragment((16, 8), Layout((16, 4)), Layout((16, 8)), 32)
    with pytest.raises(ValueError, match="thread ids"):
        Fragment((4, 8), Layout((4, 8)), Layout((4, 8), (0, 0)), 16)
    with pytest.raises(ValueError, match="distinct"):
        Fragment((4, 8), Layout((4, 8), (1, 0)), Layout((4, 8), (0, 0)), 4).inverse()


# ---------------------------------------------------------------------------
# plotting (optional matplotlib)


def test_plot_fragment_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is an optional dependency")
    path = tmp_path / "frag.png"
    assert plot_fragment(MMA_M16N8K8_TF32_B.replicated(2), path) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_fragment_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_fragment(MMA_M16N8K16_F16_C, tmp_path / "x.png")


def test_digit_indexing_writer_is_the_one_copy_that_writes():
    """Threads of the block beyond a digit layout's span hold copies; exactly the
    threads whose own digits rebuild their index write (powers of two or not)."""
    from tilejit.ir.addressing import digit_indexing, evaluate
    from tilejit.ir.digits import Digit, DigitLayout
    for span in (64, 96):
        layout = DigitLayout((span,), ((Digit("t", 1, span, 1),),), threads=128, slots=1)
        writer = digit_indexing(layout).writer
        assert [bool(evaluate(writer, {"t": t})) for t in range(128)] == \
            [t < span for t in range(128)]
    full = DigitLayout((128,), ((Digit("t", 1, 128, 1),),), threads=128, slots=1)
    assert digit_indexing(full).writer is None


def test_fragment_index_formula_is_checked_at_every_thread_and_slot():
    """``tile/addressing._check`` (vectorized over threads and slots) accepts the derived
    formula of an mma fragment and rejects a wrong one, naming the first bad (t, s)."""
    from tilejit.layouts import mma_fragment
    from tilejit.ir.addressing import FragmentIndexing, _check, fragment_indexing
    frag = mma_fragment("m16n8k16", "f16", "C")
    ix = fragment_indexing(frag)
    for t in range(32):
        for s in range(4):
            assert frag(*ix_coords(ix, t, s)) == (t, s)
    wrong = FragmentIndexing(frag, tuple(reversed(ix.coords)), None, ix.slots)
    with pytest.raises((ValueError, IndexError)):
        _check(wrong)
    shifted = FragmentIndexing(frag, (ix.coords[0], ix.coords[1] + 1), None, ix.slots)
    with pytest.raises(ValueError, match="index formula gives"):
        _check(shifted)


def ix_coords(ix, t, s):
    from tilejit.ir.addressing import evaluate
    return tuple(evaluate(c, {"t": t, "s": s}) for c in ix.coords)

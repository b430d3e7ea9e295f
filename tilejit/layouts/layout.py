"""CuTe-style layouts: functions from coordinates to offsets.

A layout is a pair of congruent (possibly nested) int tuples, ``shape`` and
``stride``.  It maps a coordinate inside ``shape`` to the offset
``sum(coord_k * stride_k)`` over the leaves.  A flat int index is first turned
into a coordinate *colexicographically*: the first mode varies fastest, as in
Fortran / CuTe (not as in numpy's C order).

Worked example -- a 4x8 row-major tile::

    >>> L = make_layout((4, 8), order="row")
    >>> print(L)
    (4,8):(8,1)
    >>> L(1, 2)            # row 1, col 2 -> 1*8 + 2*1
    10
    >>> L(5)               # flat 5 -> colex coord (5 % 4, 5 // 4) = (1, 1)
    9
    >>> L.size, L.cosize, L.rank, L.depth
    (32, 32, 2, 1)

Nested modes describe hierarchical tiles.  ``((2,2),3):((24,2),8)`` has three
leaves; an int coordinate for a nested mode is split colexicographically within
that mode, so ``L(3, 1) == L((1, 1), 1)``::

    >>> L = Layout(((2, 2), 3), ((24, 2), 8))
    >>> L(3, 1), L((1, 1), 1)
    (34, 34)

The algebra (``coalesce``, ``composition``, ``complement``, ``logical_divide``,
``logical_product``, ``right_inverse``, ``left_inverse``) is implemented on the
flattened leaf list; every function returns a new immutable ``Layout``.  All
strides must be non-negative.  Evaluating a flat index ``>= size`` extends the
last mode (as CuTe does), which is what makes ``composition`` with a tile that
overhangs its parent well defined.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator, Union

import numpy as np

IntTuple = Union[int, tuple["IntTuple", ...]]


# -- int-tuple helpers -------------------------------------------------------

def is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _normalize(x: object, what: str) -> IntTuple:
    """Turn lists into tuples and check every leaf is an int."""
    if is_int(x):
        return x  # type: ignore[return-value]
    if isinstance(x, (tuple, list)):
        if not x:
            raise ValueError(f"{what}: expected a non-empty tuple, got {x!r}")
        return tuple(_normalize(e, what) for e in x)
    raise ValueError(f"{what}: expected an int or a (nested) tuple of ints, got {x!r}")


def flatten_tuple(t: IntTuple) -> tuple[int, ...]:
    """Leaves of a nested int tuple, left to right: ``((2,2),3) -> (2,2,3)``."""
    if is_int(t):
        return (t,)  # type: ignore[return-value]
    return tuple(x for e in t for x in flatten_tuple(e))  # type: ignore[union-attr]


def product(t: IntTuple) -> int:
    return math.prod(flatten_tuple(t))


def _unflatten(flat: Iterator, profile: IntTuple):
    """Refill the leaf positions of ``profile`` with successive items of ``flat``."""
    if is_int(profile):
        return next(flat)
    return tuple(_unflatten(flat, p) for p in profile)  # type: ignore[union-attr]


def _congruent(a: IntTuple, b: IntTuple) -> bool:
    if is_int(a) or is_int(b):
        return is_int(a) and is_int(b)
    return len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b))  # type: ignore


def _fmt(t: IntTuple) -> str:
    if is_int(t):
        return str(t)
    return "(" + ",".join(_fmt(e) for e in t) + ")"  # type: ignore[union-attr]


def _compact_strides(shape: IntTuple, row_major: bool) -> IntTuple:
    """Prefix products of the leaves: col-major makes the first leaf stride 1,
    row-major the last one."""
    flat = flatten_tuple(shape)
    strides = [0] * len(flat)
    acc = 1
    for i in (reversed(range(len(flat))) if row_major else range(len(flat))):
        strides[i] = acc
        acc *= flat[i]
    return _unflatten(iter(strides), shape)


def _index_offset(idx: int, leaves: tuple[tuple[int, int], ...]) -> int:
    """Colex split of a flat index over ``leaves`` (the last leaf absorbs the rest)."""
    if idx < 0:
        raise ValueError(f"layout index: expected a non-negative int, got {idx}")
    off = 0
    last = len(leaves) - 1
    for k, (s, d) in enumerate(leaves):
        if k == last:
            return off + idx * d
        off += (idx % s) * d
        idx //= s
    return off


def _index_offsets(idx, leaves: tuple[tuple[int, int], ...]):
    """``_index_offset`` of every entry of a non-negative int64 numpy array at once."""
    off = 0
    last = len(leaves) - 1
    for k, (s, d) in enumerate(leaves):
        if k == last:
            return off + idx * d
        off = off + (idx % s) * d
        idx = idx // s
    return off


def offset_table(layout, shape: tuple[int, ...]):
    """``layout(*coord)`` for every coordinate of ``shape`` (one extent per argument the
    layout is called with), as an int64 numpy array of that shape: a Layout or a
    ComposedLayout is evaluated a mode at a time on numpy arrays (an outer sum of one
    vector per mode), anything else callable element by element. A 128x128 tile costs
    16384 Python calls element by element, about 0.1 ms as a table."""
    table = getattr(layout, "offset_table", None)
    if table is not None:
        return table(shape)
    return _table_by_element(layout, shape)


def _table_by_element(layout, shape: tuple[int, ...]):
    shape = tuple(shape)
    out = np.fromiter((layout(*c) for c in np.ndindex(*shape)), dtype=np.int64,
                      count=math.prod(shape))
    return out.reshape(shape)


def _crd2offset(crd, shape: IntTuple, stride: IntTuple) -> int:
    if is_int(crd):
        return _index_offset(crd, tuple(zip(flatten_tuple(shape), flatten_tuple(stride))))
    if not isinstance(crd, tuple) or is_int(shape) or len(crd) != len(shape):  # type: ignore
        raise ValueError(
            f"layout coordinate: expected an int or a tuple congruent with shape "
            f"{_fmt(shape)}, got {crd!r}")
    return sum(_crd2offset(c, s, d) for c, s, d in zip(crd, shape, stride))  # type: ignore


# -- the Layout type ---------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """``shape:stride`` -- an immutable map from coordinates to offsets.

    ``stride`` defaults to the compact column-major strides of ``shape``::

        >>> print(Layout((4, (2, 3))))
        (4,(2,3)):(1,(4,8))
        >>> Layout((4, 2), (2, 1))(3, 1)
        7
    """

    shape: IntTuple
    stride: IntTuple | None = None

    def __post_init__(self) -> None:
        shape = _normalize(self.shape, "Layout shape")
        if any(s <= 0 for s in flatten_tuple(shape)):
            raise ValueError(f"Layout shape: expected positive extents, got {_fmt(shape)}")
        if self.stride is None:
            stride = _compact_strides(shape, row_major=False)
        else:
            stride = _normalize(self.stride, "Layout stride")
        if not _congruent(shape, stride):
            raise ValueError(f"Layout: expected a stride congruent with shape {_fmt(shape)}, "
                             f"got {_fmt(stride)}")
        if any(d < 0 for d in flatten_tuple(stride)):
            raise ValueError(f"Layout stride: expected non-negative strides, got {_fmt(stride)}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    # Leaves cached for the fast evaluation paths (cached_property writes the
    # instance __dict__ directly, so it works on a frozen dataclass).
    @cached_property
    def _leaves(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(flatten_tuple(self.shape), flatten_tuple(self.stride)))

    @cached_property
    def _mode_leaves(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        return tuple(m._leaves for m in self)

    def __call__(self, *coord) -> int:
        """Offset of a flat index ``L(i)``, a coordinate ``L(i, j)`` or ``L((i, j))``."""
        c = coord[0] if len(coord) == 1 else coord
        if is_int(c):
            return _index_offset(c, self._leaves)
        if (isinstance(c, tuple) and not is_int(self.shape) and len(c) == len(self.shape)
                and all(is_int(x) for x in c)):
            return sum(_index_offset(x, lv) for x, lv in zip(c, self._mode_leaves))
        return _crd2offset(c, self.shape, self.stride)  # type: ignore[arg-type]

    def offset_table(self, shape: tuple[int, ...]):
        """``self(*coord)`` for every coordinate of ``shape``, as an int64 numpy array
        (see ``offset_table``): one flat index per element for a 1-d ``shape``, else an
        int per mode."""
        shape = tuple(shape)
        if len(shape) == 1:
            return _index_offsets(np.arange(shape[0], dtype=np.int64), self._leaves)
        if is_int(self.shape) or len(shape) != len(self.shape):
            return _table_by_element(self, shape)    # what __call__ makes of it
        out = np.zeros(shape, dtype=np.int64)
        for d, (n, leaves) in enumerate(zip(shape, self._mode_leaves)):
            per = _index_offsets(np.arange(n, dtype=np.int64), leaves)
            out = out + per.reshape([n if k == d else 1 for k in range(len(shape))])
        return out

    @property
    def size(self) -> int:
        """Number of coordinates: the product of the shape."""
        return product(self.shape)

    @property
    def cosize(self) -> int:
        """One past the largest offset: ``L(size - 1) + 1`` for non-negative strides."""
        return 1 + sum((s - 1) * d for s, d in self._leaves)

    @property
    def rank(self) -> int:
        return 1 if is_int(self.shape) else len(self.shape)  # type: ignore[arg-type]

    @property
    def depth(self) -> int:
        def depth(t: IntTuple) -> int:
            return 0 if is_int(t) else 1 + max(depth(e) for e in t)  # type: ignore
        return depth(self.shape)

    def __getitem__(self, key) -> Layout:
        """Mode selection: ``L[i]``, a nested path ``L[i, j]`` or a slice ``L[1:]``."""
        if isinstance(key, tuple):
            out = self
            for k in key:
                out = out[k]
            return out
        if is_int(self.shape):
            if key in (0, -1):
                return self
            raise IndexError(f"layout mode {key} out of range for rank-1 layout {self}")
        return Layout(self.shape[key], self.stride[key])  # type: ignore[index]

    def __iter__(self) -> Iterator[Layout]:
        for i in range(self.rank):
            yield self[i]

    def __str__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"  # type: ignore[arg-type]


def make_layout(shape: IntTuple, stride: IntTuple | None = None, order: str = "col") -> Layout:
    """A layout with explicit ``stride`` or compact strides in ``order``.

    ``order="col"`` (CuTe's LayoutLeft) makes the first leaf stride 1;
    ``order="row"`` (LayoutRight) makes the last leaf stride 1::

        >>> print(make_layout((2, 3)))
        (2,3):(1,2)
        >>> print(make_layout((2, 3), order="row"))
        (2,3):(3,1)
    """
    if order not in ("col", "row"):
        raise ValueError(f"make_layout: expected order 'col' or 'row', got {order!r}")
    if stride is not None:
        if order != "col":
            raise ValueError("make_layout: expected an explicit stride or an order, got both")
        return Layout(shape, stride)
    shape = _normalize(shape, "make_layout shape")
    return Layout(shape, _compact_strides(shape, row_major=(order == "row")))


def concat(*layouts: Layout) -> Layout:
    """Stack layouts as the modes of a new layout (CuTe's ``make_layout(A, B)``)."""
    if not layouts or not all(isinstance(x, Layout) for x in layouts):
        raise ValueError(f"concat: expected one or more Layouts, got {layouts!r}")
    return Layout(tuple(x.shape for x in layouts), tuple(x.stride for x in layouts))


def flatten(a: Layout) -> Layout:
    """Drop the hierarchy: ``((2,2),3):((24,2),8) -> (2,2,3):(24,2,8)``."""
    if is_int(a.shape):
        return a
    return Layout(flatten_tuple(a.shape), flatten_tuple(a.stride))  # type: ignore[arg-type]


def _from_modes(modes: list[tuple[int, int]]) -> Layout:
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def coalesce(a: Layout) -> Layout:
    """The same function of the flat index with the fewest modes.

    Algebra: size-1 modes contribute nothing and are dropped; neighbours
    ``(s0:d0, s1:d1)`` with ``d1 == s0 * d0`` merge into ``s0*s1:d0`` because
    ``i0*d0 + i1*s0*d0 == (i0 + s0*i1)*d0``::

        >>> print(coalesce(Layout((2, (1, 6)), (1, (7, 2)))))
        12:1
    """
    modes: list[tuple[int, int]] = []
    for s, d in a._leaves:
        if s == 1:
            continue
        if modes and modes[-1][0] * modes[-1][1] == d:
            modes[-1] = (modes[-1][0] * s, modes[-1][1])
        else:
            modes.append((s, d))
    return _from_modes(modes)


def _extension_modes(a: Layout) -> list[tuple[int, int]]:
    """``coalesce(a)``'s modes, but keeping the stride with which the last mode
    extends past ``size(a)``: ``1:4`` coalesces to ``1:0`` yet maps index 1 to 4,
    and composition evaluates A beyond its size when B overhangs it."""
    modes = list(coalesce(a)._leaves)
    if a.size == 1:
        modes = []
    s_last, d_last = a._leaves[-1]
    if s_last == 1 and not (modes and modes[-1][0] * modes[-1][1] == d_last):
        modes.append((1, d_last))
    return modes


def _compose_mode(a: Layout, modes: list[tuple[int, int]], s: int, d: int):
    """``A o (s:d)`` for one leaf of B; ``modes`` are A's coalesced leaves.

    ``(s:d)`` visits A's flat indices 0, d, 2d, ...  First "divide out" d: whole
    leading modes of A whose extent divides the remaining stride are skipped;
    then the stride must divide the current mode, giving a mode of extent
    ``a/r`` and stride ``e*r``.  Then "keep" s elements: they fit in that mode
    (any s <= a/r), or s must be a multiple of it and the rest continues in the
    next modes.  A's last mode is unbounded.
    """
    if s == 1:
        return 1, 0
    if d == 0:
        return s, 0
    out: list[tuple[int, int]] = []
    r, m = d, s
    for k, (ak, ek) in enumerate(modes):
        if k == len(modes) - 1:
            out.append((m, ek * r))
            break
        if r >= ak:
            if r % ak:
                raise ValueError(
                    f"composition: expected the stride of B's mode {s}:{d} to be divisible by "
                    f"the leading extents of A={a}, got remaining stride {r} vs extent {ak}")
            r //= ak
            continue
        if ak % r:
            raise ValueError(
                f"composition: expected the stride of B's mode {s}:{d} to divide an extent of "
                f"A={a}, got remaining stride {r} vs extent {ak}")
        c = ak // r
        if m <= c:
            out.append((m, ek * r))
            break
        if m % c:
            raise ValueError(
                f"composition: expected the extent of B's mode {s}:{d} to be a multiple of "
                f"{c} (the part of A={a} it spans), got remaining extent {m}")
        out.append((c, ek * r))
        m //= c
        r = 1
    if len(out) == 1:
        return out[0]
    return tuple(x for x, _ in out), tuple(y for _, y in out)


def _check_additive(a: Layout, modes: list[tuple[int, int]], b: Layout) -> None:
    """Composition distributes over B's modes, ``A(B0(x) + B1(y)) == A(B0(x)) + A(B1(y))``,
    only when the sums cause no carry between A's mixed-radix digits.

    Sort B's leaves by stride; each leaf's images are ``< d*s`` and the rest
    are multiples of the next stride ``d'``.  No carry happens when some cut
    ``q`` with ``d*s <= q`` and ``q | d'`` falls on a digit boundary of A
    (``P_k | q | P_{k+1}``, P the prefix products of A's extents).  A single
    mode, or B's whole image inside A's first mode, is linear: always fine.
    """
    leaves = sorted((d, s) for s, d in b._leaves if s > 1 and d > 0)
    if len(modes) == 1 or len(leaves) <= 1:
        return
    if sum((s - 1) * d for d, s in leaves) < modes[0][0]:
        return
    prefix = [1]
    for s, _ in modes[:-1]:
        prefix.append(prefix[-1] * s)

    def cut_exists(span: int, d2: int) -> bool:
        # q must be a multiple of lcm(P_k, span) dividing gcd(P_{k+1}, d2).
        for k, p in enumerate(prefix):
            top = d2 if k == len(prefix) - 1 else math.gcd(prefix[k + 1], d2)
            if top % math.lcm(p, span) == 0:
                return True
        return False

    for (d, s), (d2, _) in zip(leaves, leaves[1:]):
        span = d * s
        if d2 % span == 0 and cut_exists(span, d2):
            continue
        raise ValueError(
            f"composition: expected B's modes to address disjoint digit ranges of A={a} "
            f"(strides {d} then {d2} >= a multiple of {span} on a mode boundary of A), got B={b}")


def _by_mode(fn, a: Layout, tiler: tuple) -> Layout:
    if len(tiler) > a.rank:
        raise ValueError(f"expected a tiler of rank <= {a.rank} (the rank of {a}), "
                         f"got {len(tiler)} modes")
    parts = [a[i] if t is None else fn(a[i], t) for i, t in enumerate(tiler)]
    return concat(*parts, *(a[i] for i in range(len(tiler), a.rank)))


def composition(a: Layout, b) -> Layout:
    """``R = A o B``: ``R(c) == A(B(c))`` for every coordinate c of B.

    ``b`` may be a Layout, an int ``n`` (meaning ``n:1``), or a tuple *tiler*
    applied mode by mode (``None`` keeps a mode).  R has B's shape, each leaf
    refined as needed::

        >>> A = Layout((6, 2), (8, 2))
        >>> B = Layout((4, 3), (3, 1))
        >>> R = composition(A, B); print(R)
        ((2,2),3):((24,2),8)
        >>> all(R(i) == A(B(i)) for i in range(B.size))
        True
    """
    if isinstance(b, tuple):
        return _by_mode(composition, a, b)
    if is_int(b):
        b = Layout(b, 1)
    if not isinstance(b, Layout):
        raise ValueError(f"composition: expected a Layout, int or tuple tiler as B, got {b!r}")
    modes = _extension_modes(a)
    _check_additive(a, modes, b)
    leaves = [_compose_mode(a, modes, s, d) for s, d in b._leaves]
    return Layout(_unflatten(iter(x for x, _ in leaves), b.shape),  # type: ignore[arg-type]
                  _unflatten(iter(y for _, y in leaves), b.shape))  # type: ignore[arg-type]


def complement(a: Layout, cosize_bound: int | None = None) -> Layout:
    """The layout that fills the gaps of ``a`` up to ``cosize_bound``.

    Algebra: sort A's non-trivial modes by stride; with ``cur`` the extent
    covered so far (``cur = s_prev * d_prev``), each mode ``s:d`` needs
    ``d % cur == 0`` and contributes the gap mode ``(d // cur):cur``; a last
    mode ``ceil(bound / cur):cur`` repeats the whole pattern.  Then
    ``concat(A, complement(A, M))`` is a bijection onto ``[0, M)`` when A is
    injective and ``M`` is a multiple of the extent it covers::

        >>> print(complement(Layout(4, 2), 24))
        (2,3):(1,8)
    """
    bound = a.cosize if cosize_bound is None else cosize_bound
    if not is_int(bound) or bound <= 0:
        raise ValueError(f"complement: expected a positive int cosize_bound, got {bound!r}")
    modes = sorted((d, s) for s, d in a._leaves if s > 1 and d != 0)
    out: list[tuple[int, int]] = []
    cur = 1
    for d, s in modes:
        if d % cur:
            raise ValueError(
                f"complement: expected each stride of A={a} (sorted) to be a multiple of the "
                f"extent covered by the smaller ones, got stride {d} after extent {cur}")
        out.append((d // cur, cur))
        cur = s * d
    out.append((-(-bound // cur), cur))
    return coalesce(_from_modes(out))


def logical_divide(a: Layout, tiler) -> Layout:
    """Split ``a`` into (tile, rest): ``A o concat(B, complement(B, size(A)))``.

    Mode 0 of the result is the tile ``A o B``; mode 1 enumerates the tiles.
    A tuple tiler divides mode by mode::

        >>> D = logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)); print(D)
        ((2,2),(2,3)):((4,1),(2,8))
        >>> print(logical_divide(make_layout((8, 8)), (2, 4)))
        ((2,4),(4,2)):((1,2),(8,32))
    """
    if isinstance(tiler, tuple):
        return _by_mode(logical_divide, a, tiler)
    if is_int(tiler):
        tiler = Layout(tiler, 1)
    if not isinstance(tiler, Layout):
        raise ValueError(f"logical_divide: expected a Layout, int or tuple tiler, got {tiler!r}")
    return composition(a, concat(tiler, complement(tiler, a.size)))


def zipped_divide(a: Layout, tiler) -> Layout:
    """``logical_divide`` with all tile modes gathered into mode 0 and all rest
    modes into mode 1: ``((tile_0, tile_1), (rest_0, rest_1))``::

        >>> print(zipped_divide(make_layout((8, 8)), (2, 4)))
        ((2,4),(4,2)):((1,8),(2,32))
    """
    if not isinstance(tiler, tuple):
        return logical_divide(a, tiler)
    d = logical_divide(a, tuple(1 if t is None else t for t in tiler))
    n = len(tiler)
    tiles = concat(*(d[i][0] for i in range(n)))
    rests = concat(*(d[i][1] for i in range(n)), *(d[i] for i in range(n, d.rank)))
    return concat(tiles, rests)


def logical_product(a: Layout, b: Layout) -> Layout:
    """``(A, complement(A, size(A)*cosize(B)) o B)``: B repeats the tile A.

        >>> print(logical_product(Layout((2, 2), (4, 1)), Layout(6, 1)))
        ((2,2),(2,3)):((4,1),(2,8))
    """
    if is_int(b):
        b = Layout(b, 1)
    return concat(a, composition(complement(a, a.size * b.cosize), b))


def right_inverse(a: Layout) -> Layout:
    """R with ``A(R(i)) == i`` for every ``i < size(R)`` (the longest such prefix).

    Algebra: sort A's modes by stride.  Starting at ``cur = 1``, a mode ``s:d``
    with ``d == cur`` extends the contiguous image; R gets the mode ``s:p``
    where ``p`` is that mode's stride in A's *index* space (the prefix product
    of A's extents)::

        >>> R = right_inverse(Layout((4, 8), (8, 1))); print(R)
        (8,4):(4,1)
        >>> Layout((4, 8), (8, 1))(R(9))
        9
    """
    flat = coalesce(a)._leaves
    index_strides, acc = [], 1
    for s, _ in flat:
        index_strides.append(acc)
        acc *= s
    modes = sorted((d, s, p) for (s, d), p in zip(flat, index_strides) if s > 1 and d != 0)
    out: list[tuple[int, int]] = []
    cur = 1
    for d, s, p in modes:
        if d != cur:
            break
        out.append((s, p))
        cur = s * d
    return coalesce(_from_modes(out))


def left_inverse(a: Layout) -> Layout:
    """L with ``L(A(i)) == i`` for every ``i < size(A)``; A must be injective.

    Algebra: ``concat(A, complement(A))`` is a bijection onto a prefix
    ``[0, n)`` covering A's image, and its right inverse is a full inverse
    whose first ``size(A)`` indices are A's own::

        >>> L = left_inverse(Layout((4, 2), (2, 1))); print(L)
        (2,4):(4,1)
        >>> [L(Layout((4, 2), (2, 1))(i)) for i in range(8)]
        [0, 1, 2, 3, 4, 5, 6, 7]
    """
    if any(s > 1 and d == 0 for s, d in a._leaves):
        raise ValueError(f"left_inverse: expected an injective layout, got {a} (a stride-0 mode)")
    if a.size == 1:
        return Layout(1, 0)
    try:
        full = concat(a, complement(a))
    except ValueError as e:
        raise ValueError(f"left_inverse: expected an injective layout, got {a}: {e}") from None
    r = right_inverse(full)
    if r.size < a.cosize:
        raise ValueError(f"left_inverse: expected an injective layout, got {a}")
    return r

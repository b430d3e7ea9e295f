"""XOR swizzles for bank-conflict-free shared-memory tiles.

Hardware facts used here:

* Shared memory has 32 banks, each 4 bytes wide; one 128-byte line touches
  every bank once.  Think of it as eight 16-byte *bank groups* (4 banks each):
  the group of byte address ``a`` is ``(a // 16) % 8``.
* ``ldmatrix`` (PTX ISA "Warp-level matrix load instruction: ldmatrix") loads
  8x8 matrices of 16-bit elements; each matrix is 8 rows of 16 bytes, one row
  address per thread.  One matrix (8 rows x 16 B = 128 B) is served per phase,
  so the phase is conflict-free exactly when its 8 rows fall into 8 distinct
  16-byte bank groups.

A row-major fp16 tile with 64-element (128 B) rows puts column chunk ``c`` of
*every* row in bank group ``c``: an 8-way conflict.  The swizzle XORs the row
number (mod 8) into the chunk index so the 8 rows spread over all 8 groups.

Worked example -- ``Swizzle(3, 3, 3)`` on element offsets of fp16 (2 bytes):
bits [3,6) are the 16-byte chunk inside a 128-byte row, bits [6,9) the row
(mod 8); the swizzle computes ``chunk ^= row``::

    >>> sw = Swizzle(3, 3, 3)
    >>> [sw(r * 64) // 8 for r in range(8)]     # chunk 0 of rows 0..7
    [0, 9, 18, 27, 36, 45, 54, 63]
    >>> [(sw(r * 64) * 2 // 16) % 8 for r in range(8)]  # their bank groups
    [0, 1, 2, 3, 4, 5, 6, 7]
"""
from __future__ import annotations

from dataclasses import dataclass

from tilejit.layouts.layout import Layout, is_int, make_layout


@dataclass(frozen=True)
class Swizzle:
    """CuTe ``Swizzle<bits, base, shift>`` on integer offsets.

    With ``mask = (1 << bits) - 1``, the *yyy* bits
    ``mask << (base + max(shift, 0))`` are XORed into the *zzz* bits
    ``mask << (base - min(shift, 0))``::

        offset ^ ((offset & yyy_mask) >> shift)      # shift < 0 shifts left

    The two masks are disjoint (``|shift| >= bits``), so the yyy bits pass
    through unchanged and the map is an involution: a bijection on every
    aligned block of ``period = 2 ** (bits + base + |shift|)`` offsets.
    The low ``base`` bits are never touched, so aligned runs of ``2**base``
    elements (one 16-byte vector) stay contiguous.

        >>> Swizzle(2, 0, 3)(0b11000)          # yyy=0b11 -> zzz: 0b11000 ^ 0b11
        27
        >>> Swizzle(0, 3, 3)(1234)             # bits=0 is the identity
        1234
    """

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        if not all(is_int(x) for x in (self.bits, self.base, self.shift)):
            raise ValueError(f"Swizzle: expected ints, got {(self.bits, self.base, self.shift)!r}")
        if self.bits < 0 or self.base < 0:
            raise ValueError(f"Swizzle: expected bits >= 0 and base >= 0, "
                             f"got bits={self.bits}, base={self.base}")
        if abs(self.shift) < self.bits:
            raise ValueError(f"Swizzle: expected |shift| >= bits so the masks are disjoint, "
                             f"got bits={self.bits}, shift={self.shift}")

    @property
    def yyy_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base + max(self.shift, 0))

    @property
    def zzz_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base - min(self.shift, 0))

    @property
    def period(self) -> int:
        return 1 << (self.bits + self.base + abs(self.shift))

    def __call__(self, offset: int) -> int:
        if not is_int(offset) or offset < 0:
            raise ValueError(f"Swizzle: expected a non-negative int offset, got {offset!r}")
        y = offset & self.yyy_mask
        return offset ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)

    def apply(self, offsets):
        """``self(o)`` of every entry of a numpy array of non-negative offsets."""
        y = offsets & self.yyy_mask
        return offsets ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"


_SWIZZLE_BITS = {32: 1, 64: 2, 128: 3}


def swizzle_for_bytes(row_bytes: int, dtype_bytes: int = 2) -> Swizzle:
    """The 32B / 64B / 128B swizzle for rows of ``row_bytes`` bytes.

    Offsets are in elements of ``dtype_bytes``; ``base = log2(16 / dtype_bytes)``
    keeps 16-byte vectors intact and ``shift = 3`` because 8 chunks of 16 B make
    a 128-byte line.  ``bits`` = log2(row_bytes / 16): a 128 B row has 8 chunks
    and one row per line, so 3 row bits permute 8 chunks; a 64 B row has 4 chunks
    (2 rows share a line, the row parity already separates them), a 32 B row
    2 chunks (4 rows per line).  For fp16 these are CuTe's SW128/64/32 atoms::

        >>> [str(swizzle_for_bytes(n)) for n in (32, 64, 128)]
        ['Sw<1,3,3>', 'Sw<2,3,3>', 'Sw<3,3,3>']
    """
    if row_bytes not in _SWIZZLE_BITS:
        raise ValueError(f"swizzle_for_bytes: expected row_bytes in (32, 64, 128), "
                         f"got {row_bytes!r}")
    if dtype_bytes not in (1, 2, 4, 8, 16):
        raise ValueError(f"swizzle_for_bytes: expected dtype_bytes in (1, 2, 4, 8, 16), "
                         f"got {dtype_bytes!r}")
    return Swizzle(_SWIZZLE_BITS[row_bytes], (16 // dtype_bytes).bit_length() - 1, 3)


@dataclass(frozen=True)
class ComposedLayout:
    """``swizzle(offset + layout(coord))`` -- CuTe's ``ComposedLayout<Sw, O, L>``.

        >>> C = ComposedLayout(Swizzle(3, 3, 3), 0, make_layout((8, 64), order="row"))
        >>> C(1, 0), C(1, 8)          # row 1: chunks 0 and 1 are swapped
        (72, 64)
    """

    swizzle: Swizzle
    offset: int
    layout: Layout

    def __post_init__(self) -> None:
        if not isinstance(self.swizzle, Swizzle) or not isinstance(self.layout, Layout):
            raise ValueError(f"ComposedLayout: expected (Swizzle, int, Layout), got "
                             f"({self.swizzle!r}, {self.offset!r}, {self.layout!r})")
        if not is_int(self.offset) or self.offset < 0:
            raise ValueError(f"ComposedLayout: expected a non-negative int offset, "
                             f"got {self.offset!r}")

    def __call__(self, *coord) -> int:
        return self.swizzle(self.offset + self.layout(*coord))

    def offset_table(self, shape: tuple[int, ...]):
        """``self(*coord)`` for every coordinate of ``shape``, as an int64 numpy array
        (``layout.offset_table``)."""
        return self.swizzle.apply(self.offset + self.layout.offset_table(shape))

    @property
    def shape(self):
        return self.layout.shape

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def cosize(self) -> int:
        """Upper bound of the image: ``offset + cosize(layout)`` rounded up to
        the swizzle period (the swizzle permutes within aligned periods)."""
        n, p = self.offset + self.layout.cosize, self.swizzle.period
        return n if self.swizzle.bits == 0 else -(-n // p) * p

    def __str__(self) -> str:
        return f"{self.swizzle} o {self.offset} o {self.layout}"


def make_swizzled_layout(shape: tuple[int, int], dtype_bytes: int) -> Layout | ComposedLayout:
    """A shared-memory layout for a row-major ``(rows, cols)`` tile whose
    ldmatrix phases (8 rows x 16 B) are bank-conflict-free.

    Picks the widest swizzle atom (128, 64 or 32 bytes) that divides a row, and
    tiles the atom -- 8 rows x ``W`` elements, ``W = atom_bytes / dtype_bytes`` --
    over the tile, atoms down a column contiguous (a column of atoms is rows x W
    elements in row-major order, which is what one TMA box with the same swizzle
    writes)::

        offset(r, c) = (r%8)*W + (c%W) + (r//8)*8W + (c//W)*rows*W

    then XORs with ``swizzle_for_bytes(atom_bytes)``, which only permutes 16 B
    chunks inside one atom.  A row count that is not a multiple of 8 is
    swizzled only when a row is exactly one atom wide.  Rows shorter than
    32 bytes get the plain row-major layout: 16-byte rows already put 8
    consecutive rows in 8 distinct bank groups.

        >>> L = make_swizzled_layout((64, 64), 2); print(L)
        Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,4096))
        >>> print(make_swizzled_layout((64, 8), 2))
        (64,8):(8,1)
    """
    if (not isinstance(shape, tuple) or len(shape) != 2
            or not all(is_int(x) and x > 0 for x in shape)):
        raise ValueError(f"make_swizzled_layout: expected a (rows, cols) tuple of positive ints, "
                         f"got {shape!r}")
    if dtype_bytes not in (1, 2, 4, 8, 16):
        raise ValueError(f"make_swizzled_layout: expected dtype_bytes in (1, 2, 4, 8, 16), "
                         f"got {dtype_bytes!r}")
    rows, cols = shape
    row_bytes = cols * dtype_bytes
    for atom_bytes in (128, 64, 32):
        w = atom_bytes // dtype_bytes
        if row_bytes % atom_bytes == 0 and rows % 8 == 0:
            inner = Layout(((8, rows // 8), (w, cols // w)), ((w, 8 * w), (1, rows * w)))
            break
        if row_bytes == atom_bytes:
            # One atom per row: row-major *is* the atom tiling, and the swizzle
            # only permutes chunks inside a row, so any row count works.
            inner = make_layout(shape, order="row")
            break
    else:
        return make_layout(shape, order="row")
    return ComposedLayout(swizzle_for_bytes(atom_bytes, dtype_bytes), 0, inner)

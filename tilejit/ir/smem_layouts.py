"""The shared-memory layouts Hopper's asynchronous units read and write.

TMA writes a box of a 2-d tile, and wgmma reads its operands through matrix
descriptors, in one family of layouts: the tile's columns cut into atoms one swizzle
span wide (32, 64 or 128 bytes), each atom a column of 16-byte-granular rows stacked
down the tile, with bits 4..6 of each byte address XOR-ed with bits 7..9 (the span's
"swizzle"):

    linear(r, c) = (c // width) * rows * span + r * span + (c % width) * size
    address      = linear ^ (((linear >> 7) & (span / 16 - 1)) << 4)

``layouts/swizzle.make_swizzled_layout`` builds exactly these for the tiles ``T.gemm``
reads; ``canonical_layout`` recognizes one by comparing every element's offset (the
layout evaluated over the whole tile at once, ``layouts.offset_table``), so a
tile laid out any other way (an annotation) is never fed to TMA or wgmma by mistake.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tilejit.layouts import offset_table


@lru_cache(maxsize=256)
def canonical_layout(layout, shape, itemsize):
    """(swizzle bytes, columns per atom) when ``layout`` (element offsets of a tile of
    ``shape``) is one of the family above; (0, columns) for plain row-major rows of a
    whole number of 16-byte units; else None."""
    if len(shape) != 2:
        return None
    rows, cols = shape
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    actual = offset_table(layout, (rows, cols)) * itemsize
    for swizzle in (128, 64, 32):
        width = swizzle // itemsize
        if width == 0 or cols % width or rows % 8:
            continue
        linear = (c // width) * rows * swizzle + r * swizzle + (c % width) * itemsize
        expected = linear ^ (((linear >> 7) & (swizzle // 16 - 1)) << 4)
        if np.array_equal(actual, expected):
            return swizzle, width
    if (cols * itemsize) % 16 == 0 and np.array_equal(actual, (r * cols + c) * itemsize):
        return 0, cols
    return None

"""The layout of a view (``T.reshape``) of a shared tile laid out its own way (a swizzle
``T.annotate_layout`` gives it): the view's element of row-major number f is the tile's
element of row-major number f, so its offset is the tile's layout at that element.
TileLang's ``T.reshape`` of a tile with an MMA swizzle reads it so."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tilejit.ir.addressing import Const, Expr, const, layout_offset
from tilejit.layouts import offset_table


@dataclass(frozen=True, eq=False)
class ViewLayout:
    """``base`` (the tile's layout over ``base_shape``) seen in ``shape``."""

    base: object
    base_shape: tuple
    shape: tuple

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def offset_table(self, shape=None):
        return np.asarray(offset_table(self.base, self.base_shape)).reshape(
            tuple(shape or self.shape))

    def __call__(self, *coord) -> int:
        return int(self.offset_table()[tuple(coord)])

    def offset_expr(self, coords) -> Expr:
        flat: Expr = Const(0)
        for c, extent in zip(coords, self.shape):
            flat = flat * extent + const(c)
        base_coords = []
        for extent in reversed(self.base_shape[1:]):
            base_coords.append(flat % extent)
            flat = flat // extent
        base_coords.append(flat)
        return layout_offset(self.base, list(reversed(base_coords)))

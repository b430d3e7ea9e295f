"""A shared tile's layout given by a user's ``T.Layout`` the compiler knows no other
form of (``passes/user_layouts.py`` replaces the ones equal to a layout it knows):
its flat offset as an index expression (``addressing.layout_offset``), the same
function the simulator's check evaluated with numpy.

The GPU computes index expressions in unsigned 32-bit arithmetic (``lowering/tiles.emit``:
``udiv``, ``urem``, ``lshr``), Python's ``//`` and ``%`` round toward minus infinity:
the two agree where every intermediate value is non-negative, which
``FunctionLayout.check_unsigned`` verifies at every index of the tile.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilejit.ir.addressing import BinOp, Const, Expr, Var, const, evaluate
from tilejit.language.layout import Layout as UserLayout


@dataclass(frozen=True, eq=False)
class FunctionLayout:
    """``user`` (a checked ``T.Layout``) as a tile layout: ``self(*coord)`` the flat
    offset, ``offset_table``, ``offset_expr`` (the index expression of coordinates)."""

    user: UserLayout
    _table: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_table", self.user.offsets())

    @property
    def shape(self) -> tuple:
        return self.user.get_input_shape()

    @property
    def size(self) -> int:
        return self.user.size

    @property
    def cosize(self) -> int:
        return self.storage_elements

    @property
    def storage_elements(self) -> int:
        """The elements of storage it spans: past the size for an injective layout that
        grows the tile (``lambda i: i * 2``)."""
        return max(self.user.size, int(self._table.max()) + 1 if self._table.size else 0)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __call__(self, *coord) -> int:
        return int(self._table[tuple(coord)])

    def offset_table(self, shape):
        if tuple(shape) == self.shape:
            return self._table
        return np.fromiter((self(*c) for c in np.ndindex(*shape)), dtype=np.int64).reshape(
            tuple(shape))

    def offset_expr(self, coords) -> Expr:
        """The flat offset of ``coords`` (index expressions or ints)."""
        outs = self.user.forward(*(const(c) for c in coords))
        flat: Expr = Const(0)
        for o, extent in zip(outs, self.user.get_output_shape()):
            flat = flat * extent + const(o)
        return flat

    def check_unsigned(self) -> str | None:
        """None when every intermediate value of the offset expression is non-negative
        at every index of the tile (the GPU's unsigned arithmetic agrees with Python's),
        else a description of the first that is not."""
        names = [Var(f"i{k}") for k in range(self.rank)]
        expr = self.offset_expr(names)
        grid = np.indices(self.shape, dtype=np.int64)
        env = {v.name: g for v, g in zip(names, grid)}
        bad = []

        def walk(e):
            if isinstance(e, BinOp):
                walk(e.a)
                walk(e.b)
                if not bad:
                    v = np.asarray(evaluate(e, env))
                    if (v < 0).any():
                        at = [int(x) for x in np.argwhere(np.broadcast_to(v, self.shape)
                                                          < 0)[0]]
                        bad.append(f"an intermediate value ({e.op}) is negative at index {at}")
        walk(expr)
        if not bad and not np.array_equal(np.broadcast_to(evaluate(expr, env), self.shape),
                                          self._table):
            bad.append("its index expression differs from the function's values")
        return bad[0] if bad else None

    def __str__(self) -> str:
        return f"{self.user!r} (output shape {list(self.user.get_output_shape())})"

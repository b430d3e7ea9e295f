"""TileLang's rasterization plans (``tilelang.carver.roller.rasterization``): the order
a grid's blocks walk the output for L2 locality, as a hint names it. tilejit's
recommender ranks tiles without a rasterization plan: its hints carry
``NoRasterization()``; a kernel chooses its own order with ``T.use_swizzle``."""
from __future__ import annotations


class Rasterization:
    """A plan; ``panel_width`` for the 2-d ones."""
    panel_width_ = None

    @property
    def panel_width(self):
        if self.panel_width_ is None:
            raise AttributeError(f"{self!r} has no panel width")
        return self.panel_width_

    def __eq__(self, other):
        return type(other) is type(self) and other.panel_width_ == self.panel_width_

    def __hash__(self):
        return hash((type(self).__name__, self.panel_width_))


class NoRasterization(Rasterization):
    """The grid's own order."""

    def __repr__(self):
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    """Rows of blocks, ``panel_width`` at a time."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self):
        return f"<Rasterization2DRow({self.panel_width_})>"


class Rasterization2DColumn(Rasterization):
    """Columns of blocks, ``panel_width`` at a time."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self):
        return f"<Rasterization2DColumn({self.panel_width_})>"

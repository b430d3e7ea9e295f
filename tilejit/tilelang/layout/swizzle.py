"""TileLang's ``tilelang.layout.swizzle``: the shared-memory swizzles
(``language/layout.py``); the ones tilejit does not build say so when read."""
from tilejit.language.layout import (make_full_bank_swizzled_layout,
                                     make_half_bank_swizzled_layout, make_linear_layout,
                                     make_quarter_bank_swizzled_layout, make_swizzled_layout)
from tilejit.tilelang.layout import not_built

__all__ = ["make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout",
           "make_linear_layout", "make_quarter_bank_swizzled_layout", "make_swizzled_layout"]


def __getattr__(name):
    raise not_built("layout.swizzle", name)

"""TileLang's ``tilelang.intrinsics``: the hand-written MMA path's emitter
(``TensorCoreIntrinEmitter``, defined in ``tilejit/language/mma_emitter.py``), its helpers,
and the swizzle helpers of the user layouts (``tilejit.language``'s)."""
from __future__ import annotations

from tilejit.language.mma_emitter import (TensorCoreIntrinEmitter, get_mma_micro_size,
                                          mma_store_index_map)

__all__ = ["TensorCoreIntrinEmitter", "get_mma_micro_size", "mma_store_index_map",
           "get_swizzle_layout", "make_mma_swizzle_layout"]

_LAYOUT_HELPERS = ("get_swizzle_layout", "make_mma_swizzle_layout")


def __getattr__(name):
    if name in _LAYOUT_HELPERS:        # the language's user layouts
        from tilejit import language
        return getattr(language, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""TileLang's ``tilelang.language.annotations``: the kernel annotations by their module
path (``from tilelang.language.annotations import annotate_layout``). They are the
language's own functions (``T.annotate_layout`` is this module's ``annotate_layout``),
so the front end recognises them under either name."""
from __future__ import annotations

from tilejit.language.tiles import (annotate_l2_hit_ratio, annotate_layout,
                                    annotate_min_blocks_per_sm, annotate_restrict_buffers,
                                    annotate_safe_value, use_swizzle)

__all__ = ["use_swizzle", "annotate_layout", "annotate_safe_value", "annotate_l2_hit_ratio",
           "annotate_restrict_buffers", "annotate_min_blocks_per_sm"]

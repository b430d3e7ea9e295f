"""TileLang's ``tilelang.math`` helpers, as ``tilejit.cdiv`` and
``tilejit.next_power_of_2``: host-side integer arithmetic (``cdiv`` is
``T.ceildiv``, so a kernel may use it too)."""
from __future__ import annotations

from tilejit.language import ceildiv as cdiv
from tilejit.language.compat import module_getattr

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The least power of two not below ``x`` (1 for ``x`` ≤ 1)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.math", __name__,
    "of TileLang's math helpers tilejit has cdiv and next_power_of_2")

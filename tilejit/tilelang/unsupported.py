"""TileLang's top-level names (``tilelang.<name>``) that tilejit does not have:
``tilejit/__init__.py`` sends each here (its ``_LAZY`` table), and reading it raises
``NotSupportedError`` naming it (``language/compat.py`` says why for each)."""
from __future__ import annotations

from tilejit.language.compat import TILELANG, not_supported

__all__: list = []
NAMES = tuple(TILELANG)


def __getattr__(name):
    raise not_supported(name, "tilelang", "tilejit")

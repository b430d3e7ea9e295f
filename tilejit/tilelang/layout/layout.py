"""TileLang's ``tilelang.layout.layout``: ``Layout`` (``language/layout.py``)."""
from tilejit.language.layout import Layout, LayoutError

__all__ = ["Layout", "LayoutError"]

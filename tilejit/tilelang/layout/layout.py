"""TileLang's ``tilelang.layout.layout``: ``Layout`` (``language/layout.py``)."""
from tilejit.language.layout import Layout, LayoutError
from tilejit.language.compat import module_getattr

__all__ = ["Layout", "LayoutError"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.layout.layout", __name__,
    "of TileLang's layouts tilejit has Layout")

"""TileLang's ``tilelang.layout.fragment``: ``Fragment`` (``language/fragment_layout.py``)."""
from tilejit.language.fragment_layout import Fragment
from tilejit.language.compat import module_getattr

__all__ = ["Fragment"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.layout.fragment", __name__,
    "of TileLang's fragment layouts tilejit has Fragment")

"""TileLang's ``tilelang.layout.fragment``: ``Fragment`` (``language/fragment_layout.py``)."""
from tilejit.language.fragment_layout import Fragment

__all__ = ["Fragment"]

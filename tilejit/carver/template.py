"""TileLang's ``tilelang.carver.template`` path: ``MatmulTemplate`` (``recommend.py``)."""
from tilejit.carver.recommend import Hint, MatmulTemplate

__all__ = ["Hint", "MatmulTemplate"]

"""``tilejit.carver.roller``: TileLang's ``tilelang.carver.roller`` path (its
rasterization plans, which the recommender's hints carry: ``rasterization.py``)."""
from tilejit.language.compat import module_getattr

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.carver.roller", __name__,
    "TileLang's roller searches TVM IR, which tilejit does not build; tilejit's carver "
    "templates search on their own (of the roller tilejit has rasterization)")

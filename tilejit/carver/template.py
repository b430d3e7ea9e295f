"""TileLang's ``tilelang.carver.template`` path: ``MatmulTemplate`` (``recommend.py``),
``FlashAttentionTemplate``, ``ElementwiseTemplate``, ``GeneralReductionTemplate`` and
``GEMVTemplate`` (``templates.py``)."""
from tilejit.carver.recommend import Hint, MatmulTemplate
from tilejit.carver.templates import (ElementwiseTemplate, FlashAttentionTemplate,
                                      GEMVTemplate, GeneralReductionTemplate)
from tilejit.language.compat import module_getattr

__all__ = ["ElementwiseTemplate", "FlashAttentionTemplate", "GEMVTemplate",
           "GeneralReductionTemplate", "Hint", "MatmulTemplate"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.carver.template", __name__,
    "of TileLang's carver templates tilejit has MatmulTemplate, GEMVTemplate, "
    "FlashAttentionTemplate, ElementwiseTemplate and GeneralReductionTemplate")

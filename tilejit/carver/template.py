"""TileLang's ``tilelang.carver.template`` path: ``MatmulTemplate`` (``recommend.py``),
``FlashAttentionTemplate``, ``ElementwiseTemplate`` and ``GeneralReductionTemplate``
(``templates.py``)."""
from tilejit.carver.recommend import Hint, MatmulTemplate
from tilejit.carver.templates import (ElementwiseTemplate, FlashAttentionTemplate,
                                      GeneralReductionTemplate)

__all__ = ["ElementwiseTemplate", "FlashAttentionTemplate", "GeneralReductionTemplate", "Hint",
           "MatmulTemplate"]

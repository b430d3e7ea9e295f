"""TileLang's ``tilelang.carver`` module path: what kernels ask of the device (``from
tilejit.carver.arch import driver`` then ``driver.get_num_sms()``), and the tile
recommender (``carver.MatmulTemplate``, as ``from tilejit.carver.template import
MatmulTemplate``; ``recommend.py``, ``templates.py``). The names are read on first use:
importing the package loads neither the recommender nor the device's driver."""
import importlib

from tilejit.language.compat import not_in_module

# TileLang's package-level names: the module of tilejit's that has each
_NAMES = {
    "MatmulTemplate": "tilejit.carver.template", "GEMVTemplate": "tilejit.carver.template",
    "ElementwiseTemplate": "tilejit.carver.template",
    "GeneralReductionTemplate": "tilejit.carver.template",
    "FlashAttentionTemplate": "tilejit.carver.template", "Hint": "tilejit.carver.template",
    "CUDA": "tilejit.carver.arch", "CDNA": "tilejit.carver.arch",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
        globals()[name] = value
        return value
    raise not_in_module(name, "tilelang.carver", __name__,
                        "TileLang's carver analyses and schedules TVM IR, which tilejit does "
                        f"not build; tilejit's carver has {', '.join(__all__)} and the "
                        f"modules arch, roller, template")

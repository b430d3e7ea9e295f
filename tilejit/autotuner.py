"""``tilejit.autotuner``: TileLang's ``tilelang.autotuner`` module path. The module is
``tilejit/tilelang/autotuner.py``; importing this name gives that same module object."""
import sys

from tilejit.tilelang import autotuner as _module

sys.modules[__name__] = _module

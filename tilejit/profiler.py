"""``tilejit.profiler``: TileLang's ``tilelang.profiler`` module path. The module is
``tilejit/tilelang/profiler.py``; importing this name gives that same module object."""
import sys

from tilejit.tilelang import profiler as _module

sys.modules[__name__] = _module

"""TileLang's ``tilelang.engine``: the names its programs import from it
(``engine.callback``'s post-processing hooks)."""
from tilejit.language.compat import module_getattr
from tilejit.tilelang.engine.param import KernelParam  # noqa: F401 - TileLang's name here

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.engine", __name__,
    "TileLang's TVM lowering engine (tilejit compiles the program's Python itself; "
    "engine.callback's post-processing hooks import, and refuse to register)")

"""tilejit: TileLang's tile programming model as a Numba-style JIT that emits PTX."""
from . import language
from .errors import CompileError
from .kernel import kernel

__version__ = "0.1.0"
__all__ = ["kernel", "language", "CompileError", "__version__"]

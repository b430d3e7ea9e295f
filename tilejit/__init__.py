"""tilejit: TileLang's tile programming model as a Numba-style JIT that emits PTX."""
__version__ = "0.1.0"

from . import language  # noqa: E402
from .autotune import autotune  # noqa: E402
from .errors import CompileError  # noqa: E402
from .kernel import kernel  # noqa: E402
from . import testing  # noqa: E402
from .tilelang_jit import PassConfigKey, jit  # noqa: E402
from .tilelang_classic import compile  # noqa: E402,A004
from . import profiler  # noqa: E402

__all__ = ["kernel", "autotune", "jit", "compile", "PassConfigKey", "language", "testing",
           "profiler", "CompileError", "__version__"]

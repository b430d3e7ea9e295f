"""Names TileLang programs use besides SPEC's, for ``tilejit.jit`` (the seeds'
front door): shape symbols, tensor annotations and the ``@T.prim_func`` record. They are
read by the front end from the source (``tilejit/tilelang/jit.py``) and by the classic
door (``tilejit/tilelang/classic.py``, which compiles a ``PrimFunc``), not executed
inside kernels."""
from __future__ import annotations

import warnings

from tilejit.language.dtypes import DType, as_dtype


class Symbol:
    """A named dimension: ``M = T.const("M")`` (bound to a tensor's shape, compile-time
    where the program needs it) or ``T.dynamic("m")`` (never specialized).

    ``T.Var`` is this class, as TileLang's ``T.Var`` is the class of its symbols:
    ``isinstance(M, T.Var)`` tells a symbolic extent from a number, and
    ``T.Var("n", T.int32)`` makes a run-time one (as ``T.dynamic("n")``)."""

    def __init__(self, name: str, dtype="int32", dynamic: bool = True):
        if not isinstance(name, str):
            raise TypeError(f"T.Var: the name must be a str, got {name!r}")
        self.name = name
        self.dtype = as_dtype(dtype if dtype is not None else "int32")
        self.dynamic = dynamic

    def __repr__(self):
        return f"T.{'dynamic' if self.dynamic else 'const'}({self.name!r})"

    # ``n * 4``, ``n + 1``, ``3 * n - 2`` in a ``T.prim_func``'s annotations: a linear
    # extent (``LinearExtent``) whose size gives ``n``
    def __mul__(self, k):
        return LinearExtent(self, 1, 0) * k

    __rmul__ = __mul__

    def __add__(self, k):
        return LinearExtent(self, 1, 0) + k

    __radd__ = __add__

    def __sub__(self, k):
        return LinearExtent(self, 1, 0) - k


class LinearExtent:
    """``a * n + b`` of a symbol ``n`` and integers ``a > 0``, ``b``: an extent of a
    ``T.prim_func`` annotation (``T.Tensor((n * 4,), ...)``). A tensor's size ``s`` there
    gives ``n = (s - b) / a``, which must be a whole number not below 0."""

    def __init__(self, symbol: Symbol, a: int, b: int):
        self.symbol, self.a, self.b = symbol, a, b

    @property
    def name(self):
        return self.symbol.name

    @property
    def dynamic(self):
        return self.symbol.dynamic

    def _int(self, k, op):
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"a symbolic extent takes integers: {self!r} {op} {k!r} (only "
                            f"a * n + b of one symbol is supported)")
        return k

    def __mul__(self, k):
        k = self._int(k, "*")
        if k <= 0:
            raise TypeError(f"a symbolic extent's factor must be positive, got {k}")
        return LinearExtent(self.symbol, self.a * k, self.b * k)

    __rmul__ = __mul__

    def __add__(self, k):
        return LinearExtent(self.symbol, self.a, self.b + self._int(k, "+"))

    __radd__ = __add__

    def __sub__(self, k):
        return LinearExtent(self.symbol, self.a, self.b - self._int(k, "-"))

    def value(self, n: int) -> int:
        """The extent for symbol value ``n``."""
        return self.a * n + self.b

    def solve(self, size: int):
        """The symbol's value for an extent of ``size``, or None when there is none."""
        n, rest = divmod(size - self.b, self.a)
        return n if rest == 0 and n >= 0 else None

    def __repr__(self):
        sign = "+" if self.b >= 0 else "-"
        return (f"{self.a} * {self.symbol.name}" if self.a != 1 else self.symbol.name) + (
            f" {sign} {abs(self.b)}" if self.b else "")


def const(names: str):
    """``M = T.const("M")`` or ``M, N = T.const("M, N")``."""
    parts = [n.strip() for n in names.replace(" ", ",").split(",") if n.strip()]
    symbols = tuple(Symbol(n, dynamic=False) for n in parts)
    return symbols[0] if len(symbols) == 1 else symbols


def dynamic(name: str, dtype=None):
    """``T.dynamic("m")``: a run-time dimension (never a specialization)."""
    return Symbol(name, dtype, dynamic=True)


_SYMBOLIC_WARNED = False


def warn_symbolic(where: tuple[str, int] | None = None) -> None:
    """TileLang deprecated ``T.symbolic`` in favour of ``T.dynamic``: say so, once per
    process. ``where`` (file, line) is the use the eager front end read from a body."""
    global _SYMBOLIC_WARNED
    if _SYMBOLIC_WARNED:
        return
    _SYMBOLIC_WARNED = True
    message = ("T.symbolic is deprecated (as in TileLang): use T.dynamic, which means "
               "the same")
    if where is None:
        warnings.warn(message, DeprecationWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, DeprecationWarning, where[0], where[1])


def symbolic(name: str, dtype=None):
    """TileLang's deprecated name of ``T.dynamic`` (a DeprecationWarning, once)."""
    warn_symbolic()
    return dynamic(name, dtype)


class _Dyn:
    def __getitem__(self, name):
        return dynamic(name)


dyn = _Dyn()


class TensorAnnotation:
    """``A: T.Tensor((M, K), dtype)`` / ``T.Tensor[[M, K], dtype]`` / ``T.Buffer``."""

    def __init__(self, shape, dtype="float32"):
        self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        self.dtype = as_dtype(dtype)

    def __class_getitem__(cls, item):
        shape, dtype = item
        return cls(shape, dtype)

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype})"


Tensor = TensorAnnotation
Buffer = TensorAnnotation


class ScalarAnnotation:
    """``n: T.int32`` on a ``T.prim_func`` parameter: a scalar passed at each call (a
    Python or numpy number of that kind), not a tensor."""
    shape = ()
    scalar = True

    def __init__(self, dtype):
        self.dtype = as_dtype(dtype)

    def __repr__(self):
        return f"T.{self.dtype.name}"


class PrimFunc:
    """What ``@T.prim_func`` returns: the kernel function and its annotations
    (compiled by ``tilejit/tilelang/classic.py``)."""

    def __init__(self, func):
        self.func = func
        self.__name__ = func.__name__
        self.__wrapped__ = func
        self.params = list(func.__code__.co_varnames[:func.__code__.co_argcount])
        annotations = getattr(func, "__annotations__", {})
        self.annotations = {}
        for name in self.params:
            ann = annotations.get(name)
            if isinstance(ann, DType):
                ann = ScalarAnnotation(ann)
            if not isinstance(ann, (TensorAnnotation, ScalarAnnotation)):
                raise TypeError(f"@T.prim_func {func.__name__}: parameter {name!r} needs a "
                                f"T.Tensor/T.Buffer annotation or a scalar dtype (T.int32), "
                                f"got {ann!r}")
            self.annotations[name] = ann

    def __call__(self, *args, **kwargs):
        raise TypeError("a T.prim_func is compiled first: tilejit.compile(func) or a "
                        "@tilejit.jit factory")

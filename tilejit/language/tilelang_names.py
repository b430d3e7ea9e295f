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

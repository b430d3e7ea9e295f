"""Names TileLang programs use besides SPEC's, for ``tilejit.jit`` (the seeds'
front door): shape symbols, tensor annotations and the ``@T.prim_func`` record. They are
read by the front end from the source (``tilejit/tilelang/jit.py``) and by the classic
door (``tilejit/tilelang/classic.py``, which compiles a ``PrimFunc``), not executed
inside kernels."""
from __future__ import annotations

import ast
import warnings

import numpy as np

from tilejit.errors import CompileError
from tilejit.language.compat import missing_attribute
from tilejit.language._semantics import meaning
from tilejit.language.function_attrs import PASS_CONFIGS, AnnotationError, function_annotations
from tilejit.language.dtypes import DType, as_dtype, not_held, ptr


class SymbolicInt:
    """Integer arithmetic on shape symbols, as TileLang programs write it outside the
    kernel body (``T.ceildiv(m, block_M)``, ``m // 2``, ``n * k``, ``m % 4``, ``m - 1``,
    ``m < 128``): the result is a ``SymbolicExpr`` (a ``LinearExtent`` while it stays
    ``a * n + b`` of one symbol with ``a > 0``, the form a tensor's size solves), whose
    value is known once its symbols' values are (``evaluate``). Python cannot branch on it
    or use it as an ``int``: that is a TypeError naming the symbol."""

    def symbols(self) -> list:
        raise NotImplementedError

    def evaluate(self, env: dict) -> int:
        """The value for symbol values ``env`` ({symbol name: int})."""
        raise NotImplementedError

    def to_ast(self, read):
        """This expression as Python source, each symbol ``s`` written ``read(s)``."""
        raise NotImplementedError

    def _names(self) -> str:
        return ", ".join(dict.fromkeys(s.name for s in self.symbols()))

    def _other(self, k, op):
        if isinstance(k, SymbolicInt) or (isinstance(k, int) and not isinstance(k, bool)):
            return k
        raise TypeError(f"shape symbol {self._names()}: {self} {op} {k!r} is not supported "
                        "(a symbol combines with integers and other symbols: + - * // % "
                        "and comparisons)")

    def _op(self, op, k, reflected=False):
        k = self._other(k, op)
        return SymbolicExpr(op, (k, self) if reflected else (self, k))

    def __add__(self, k):
        return self._op("+", k)

    def __radd__(self, k):
        return self._op("+", k, True)

    def __sub__(self, k):
        return self._op("-", k)

    def __rsub__(self, k):
        return self._op("-", k, True)

    def __mul__(self, k):
        return self._op("*", k)

    def __rmul__(self, k):
        return self._op("*", k, True)

    def __floordiv__(self, k):
        return self._op("//", k)

    def __rfloordiv__(self, k):
        return self._op("//", k, True)

    def __mod__(self, k):
        return self._op("%", k)

    def __rmod__(self, k):
        return self._op("%", k, True)

    def __neg__(self):
        return SymbolicExpr("-", (0, self))

    def __lt__(self, k):
        return self._op("<", k)

    def __le__(self, k):
        return self._op("<=", k)

    def __gt__(self, k):
        return self._op(">", k)

    def __ge__(self, k):
        return self._op(">=", k)

    def __truediv__(self, k):
        raise TypeError(f"shape symbol {self._names()}: {self} / {k!r} is not an integer; "
                        "use // or T.ceildiv")

    __rtruediv__ = __truediv__

    def __index__(self):
        raise TypeError(f"shape symbol {self._names()}: {self} has no value before the "
                        "kernel runs (a T.dynamic size); it cannot be used as a Python int")

    __int__ = __index__


class Symbol(SymbolicInt):
    """A named dimension: ``M = T.const("M")`` (bound to a tensor's shape, compile-time
    where the program needs it) or ``T.dynamic("m")`` (never specialized).

    ``T.Var`` is this class, as TileLang's ``T.Var`` is the class of its symbols:
    ``isinstance(M, T.Var)`` tells a symbolic extent from a number, and
    ``T.Var("n", T.int32)`` makes a run-time one (as ``T.dynamic("n")``). Arithmetic on
    it is a ``SymbolicExpr`` (``SymbolicInt``)."""

    def __init__(self, name: str, dtype="int32", dynamic: bool = True):
        if not isinstance(name, str):
            raise TypeError(f"T.Var: the name must be a str, got {name!r}")
        self.name = name
        self.dtype = as_dtype(dtype if dtype is not None else "int32")
        self.dynamic = dynamic

    def __repr__(self):
        return f"T.{'dynamic' if self.dynamic else 'const'}({self.name!r})"

    def __str__(self):
        return self.name

    def symbols(self):
        return [self]

    def evaluate(self, env):
        if self.name not in env:
            raise ValueError(f"shape symbol {self.name} has no value (known: "
                             f"{', '.join(env) or 'none'})")
        return int(env[self.name])

    def to_ast(self, read):
        return read(self)

    # ``n * 4``, ``n + 1``, ``3 * n - 2``: a linear extent (``LinearExtent``) whose size
    # gives ``n``
    def _op(self, op, k, reflected=False):
        return LinearExtent(self, 1, 0)._op(op, k, reflected)


_EVAL = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
         "//": lambda a, b: a // b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
         "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_AST = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "//": ast.FloorDiv, "%": ast.Mod}
_AST_CMP = {"<": ast.Lt, "<=": ast.LtE, ">": ast.Gt, ">=": ast.GtE}


class SymbolicExpr(SymbolicInt):
    """``left op right`` over shape symbols and integers (``op`` one of + - * // % < <= >
    >=). In a ``T.prim_func``'s annotation it is an extent checked once its symbols are
    known (from other extents); a closure value of the kernel body is computed there from
    the tensors' sizes (``tilelang/classic.py``)."""

    def __init__(self, op: str, args: tuple):
        self.op, self.args = op, args

    @property
    def dynamic(self):
        return any(s.dynamic for s in self.symbols())

    def symbols(self):
        return [s for a in self.args if isinstance(a, SymbolicInt) for s in a.symbols()]

    def evaluate(self, env):
        left, right = (a.evaluate(env) if isinstance(a, SymbolicInt) else a for a in self.args)
        return _EVAL[self.op](left, right)

    def to_ast(self, read):
        left, right = (a.to_ast(read) if isinstance(a, SymbolicInt) else ast.Constant(a)
                       for a in self.args)
        if self.op in _AST_CMP:
            return ast.Compare(left, [_AST_CMP[self.op]()], [right])
        return ast.BinOp(left, _AST[self.op](), right)

    def __bool__(self):
        raise TypeError(f"shape symbol {self._names()}: whether {self} holds is known only "
                        "when the kernel runs; Python cannot branch on it (use T.if_then_else "
                        "or an if inside the kernel)")

    def __repr__(self):
        left, right = (f"({a!r})" if isinstance(a, SymbolicExpr) else
                       (a.name if isinstance(a, Symbol) else repr(a)) for a in self.args)
        return f"{left} {self.op} {right}"


class LinearExtent(SymbolicExpr):
    """``a * n + b`` of a symbol ``n`` and integers ``a > 0``, ``b``: an extent of a
    ``T.prim_func`` annotation (``T.Tensor((n * 4,), ...)``). A tensor's size ``s`` there
    gives ``n = (s - b) / a``, which must be a whole number not below 0."""

    def __init__(self, symbol: Symbol, a: int, b: int):
        self.symbol, self.a, self.b = symbol, a, b
        product = symbol if a == 1 else SymbolicExpr("*", (a, symbol))
        super().__init__("+" if b >= 0 else "-", (product, abs(b)))

    @property
    def name(self):
        return self.symbol.name

    @property
    def dynamic(self):
        return self.symbol.dynamic

    def _op(self, op, k, reflected=False):
        if isinstance(k, int) and not isinstance(k, bool):
            if op == "+":
                return LinearExtent(self.symbol, self.a, self.b + k)
            if op == "-" and not reflected:
                return LinearExtent(self.symbol, self.a, self.b - k)
            if op == "*" and k > 0:
                return LinearExtent(self.symbol, self.a * k, self.b * k)
        if (self.a, self.b) == (1, 0):      # the bare symbol in a wider expression
            return SymbolicInt._op(self.symbol, op, k, reflected)
        return SymbolicInt._op(self, op, k, reflected)

    def symbols(self):
        return [self.symbol]

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


# what a ``T.prim_func`` annotation extent or a closure value may be besides an int
SYMBOLIC = (SymbolicInt,)


def _symbol_names(names, what: str) -> list[str]:
    """The names of ``"M"``, ``"M, N"`` or ``"M N"`` (TileLang splits at commas, else at
    spaces)."""
    if not isinstance(names, str):
        raise TypeError(f"{what}(name): the name must be a str such as \"M\" or \"M, N\", "
                        f"got {type(names).__name__} {names!r}")
    parts = [n.strip() for n in names.replace(" ", ",").split(",") if n.strip()]
    if not parts or not all(p.isidentifier() for p in parts):
        raise ValueError(f"{what}(name): expected one name or names separated by commas "
                         f"(\"M, N\"), got {names!r}")
    return parts


def const(names: str):
    """``M = T.const("M")`` or ``M, N = T.const("M, N")``."""
    symbols = tuple(Symbol(n, dynamic=False) for n in _symbol_names(names, "T.const"))
    return symbols[0] if len(symbols) == 1 else symbols


def dynamic(name: str, dtype=None):
    """``T.dynamic("m")``: a run-time dimension (never a specialization); ``m, n =
    T.dynamic("m, n")`` declares several, as in TileLang."""
    symbols = tuple(Symbol(n, dtype, dynamic=True) for n in _symbol_names(name, "T.dynamic"))
    return symbols[0] if len(symbols) == 1 else symbols


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


def _names_a_dtype(value) -> bool:
    if isinstance(value, DType) or (isinstance(value, str) and not_held(value) is not None):
        return True             # one no tensor holds too: the annotation says so
    try:
        as_dtype(value)
    except (TypeError, ValueError, KeyError):
        return False
    return not isinstance(value, int)


def _is_extent(d) -> bool:
    """An int >= 0 (a numpy integer too, not a bool) or a symbol (T.dynamic, T.symbolic,
    T.const, an expression of them; an extent @tilelang.jit keeps as source until its
    symbols have sizes, whose class says ``is_extent``)."""
    if isinstance(d, SymbolicInt) or getattr(type(d), "is_extent", False) is True:
        return True
    return isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0


class TensorAnnotation:
    """``A: T.Tensor((M, K), dtype)`` / ``T.Tensor[[M, K], dtype]`` / ``T.Buffer``."""

    def __init__(self, shape, dtype="float32"):
        self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        for k, d in enumerate(self.shape):
            # an int (a numpy one too) or a symbol: a bool, a float (np.float32(8.0)), a
            # nested tuple or a negative np.int64 was kept, and failed later, inside
            if not _is_extent(d):
                raise TypeError(f"T.Tensor: extent {k} of the shape {self.shape} is {d!r}; an "
                                f"extent is an int >= 0, or a symbol for a size known at the call "
                                f"(T.dynamic(\"{d if isinstance(d, str) else 'n'}\"), "
                                f"T.symbolic(...))")
        self.shape = tuple(int(d) if isinstance(d, np.integer) else d for d in self.shape)
        # None is TileLang's default too (a buffer declared without a dtype: float32)
        self.dtype = as_dtype("float32" if dtype is None else dtype)

    def __class_getitem__(cls, item):
        """``T.Tensor[shape, dtype]``, or ``T.Tensor[shape]`` (float32, as TileLang's
        default): a pair whose second entry names a dtype is (shape, dtype), also for a
        one-dimensional shape written as its extent (``T.Tensor[n, "bfloat16"]``)."""
        if isinstance(item, tuple) and len(item) == 2 and _names_a_dtype(item[1]):
            return cls(*item)
        return cls(item)

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype})"


Tensor = TensorAnnotation
Buffer = TensorAnnotation


class StridedTensorAnnotation(TensorAnnotation):
    """``A: T.StridedTensor((M, N), (ld, 1), dtype)`` / ``T.StridedTensor[shape, strides,
    dtype]``: a tensor whose strides (in elements) the call checks: a number is the stride
    the tensor must have, a symbol (``T.dynamic("ld")``) takes the tensor's stride and may
    be used in the body. tilejit reads every tensor's strides at run time (a ``T.Tensor``
    takes any strides too); a dimension of extent 1 may have any stride."""

    def __init__(self, shape, strides, dtype="float32"):
        super().__init__(shape, dtype)
        self.strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
        if len(self.strides) != len(self.shape):      # TileLang's ValueError
            raise ValueError(f"T.StridedTensor: {len(self.shape)} extents {self.shape} but "
                            f"{len(self.strides)} strides {self.strides}; give one stride "
                            "per dimension")

    def __class_getitem__(cls, item):
        """``T.StridedTensor[shape, strides]`` (float32) or ``[shape, strides, dtype]``."""
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise TypeError("T.StridedTensor[shape, strides, dtype]: expected 2 or 3 entries, "
                            f"got {item!r}")
        return cls(*item)

    def __repr__(self):
        return f"T.StridedTensor({self.shape}, {self.strides}, {self.dtype})"


StridedTensor = StridedTensorAnnotation


class BufferAnnotation(TensorAnnotation):
    """``x: T.SharedBuffer(shape, dtype)`` / ``T.FragmentBuffer`` / ``T.LocalBuffer`` on a
    ``@T.macro``'s parameter, as TileLang's macros declare the tiles they are passed: a
    note for the reader (the macro is inlined, and its body uses the tile it is given).
    A kernel's parameters are tensors: ``T.Tensor``."""
    scope = "shared"

    def __repr__(self):
        return f"T.{type(self).__name__[:-len('Annotation')]}({self.shape}, {self.dtype})"


class SharedBufferAnnotation(BufferAnnotation):
    scope = "shared"


class FragmentBufferAnnotation(BufferAnnotation):
    scope = "fragment"


class LocalBufferAnnotation(BufferAnnotation):
    scope = "local"


SharedBuffer = SharedBufferAnnotation
FragmentBuffer = FragmentBufferAnnotation
LocalBuffer = LocalBufferAnnotation


class ScalarAnnotation:
    """``n: T.int32`` on a ``T.prim_func`` parameter: a scalar passed at each call (a
    Python or numpy number of that kind), not a tensor."""
    shape = ()
    scalar = True

    def __init__(self, dtype, symbol=None):
        self.dtype = as_dtype(dtype)
        self.symbol = symbol        # `tokens: n`: the shape symbol this parameter is

    def __repr__(self):
        return repr(self.symbol) if self.symbol is not None else f"T.{self.dtype.name}"


class PointerAnnotation(ScalarAnnotation):
    """``a_ptr: T.ptr`` on a ``T.prim_func`` parameter: an address, given as a tensor
    (its data pointer is passed, and its device says where the kernel runs) or as an int
    (``tensor.data_ptr()``); ``T.make_tensor(a_ptr, shape, dtype)`` reads memory there."""
    pointer = True

    def __init__(self):
        super().__init__("int64")

    def __repr__(self):
        return "T.ptr"


def _body(func):
    """The function's syntax tree (None where its source cannot be read)."""
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    fdef = tree.body[0] if tree.body else None
    return fdef if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _annotated_in_body(func) -> set:
    """The names a statement of the function's body annotates (``A: T.Tensor[...]``)."""
    fdef = _body(func)
    if fdef is None:
        return set()
    return {s.target.id for s in fdef.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def returned_count(fdef) -> int:
    """How many values the function's own body returns (``return B, C``: 2; a function
    defined in it is not the body), or 0."""
    todo, found = list(fdef.body) if fdef is not None else [], 0
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            found = max(found, len(node.value.elts) if isinstance(node.value, ast.Tuple) else 1)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _namespace(func) -> dict:
    """The function's globals and closure values now."""
    namespace = dict(func.__globals__)
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:          # a cell not filled yet
            pass
    return namespace


def _evaluated_annotations(func, outer=None) -> dict:
    """The function's annotations, those written as strings (``from __future__ import
    annotations``) evaluated where it is defined: its globals, the locals of the function
    it is defined in (``outer``, where known: a name only the annotations read is not in
    the closure) and its closure; one that does not evaluate stays a string (and is
    reported as the annotation it is)."""
    annotations = dict(getattr(func, "__annotations__", {}))
    # (a dtype is a str too, TileLang's are: T.bool is the dtype, not a name to evaluate)
    if any(isinstance(a, str) and not isinstance(a, DType) for a in annotations.values()):
        namespace = _namespace(func)
        if outer:
            namespace = {**func.__globals__, **outer, **namespace}
        for name, a in annotations.items():
            if isinstance(a, str) and not isinstance(a, DType):
                try:
                    annotations[name] = eval(a, namespace)  # noqa: S307 - the program's own
                except Exception:       # noqa: BLE001 - left as written, reported so
                    pass
    return annotations


def _function_attrs(func) -> dict:
    """The function's ``T.annotate_pass_configs`` / ``T.annotate_compile_flags``, read now
    (``function_attrs.py``); a malformed one is a CompileError at its line."""
    import inspect
    fdef = _body(func)
    if fdef is None:
        return {}
    try:
        found, _ = function_annotations(fdef.body, _namespace(func))
    except AnnotationError as e:
        filename = inspect.getsourcefile(func) or "<unknown>"
        line = func.__code__.co_firstlineno + e.node.lineno - 1
        raise CompileError(str(e), filename, line) from None
    return found


class PrimFunc:
    """What ``@T.prim_func`` returns: the kernel function and its annotations
    (compiled by ``tilejit/tilelang/classic.py``)."""

    def __getattr__(self, name):
        raise missing_attribute(self, name, "PrimFunc", "TVM's PrimFunc (its IR: body, "
                                "buffer_map, script); tilejit compiles the program's Python "
                                "and keeps no TVM IR")

    def __init__(self, func, outer=None):
        """``outer``: the locals of the function ``func`` is defined in, where known."""
        self.func = func
        self.__name__ = func.__name__
        self.__wrapped__ = func
        self.params = list(func.__code__.co_varnames[:func.__code__.co_argcount])
        annotations = _evaluated_annotations(func, outer)
        self.annotations = {}
        # TileLang's "lazy" form: parameters annotated in the body (``A: T.Tensor[...]``),
        # outputs made with ``T.empty`` and returned, as an eager @tilejit.jit program
        # writes them; compiled as one (``classic.compile``)
        unannotated = [n for n in self.params if n not in annotations]
        in_body = _annotated_in_body(func) if unannotated else set()
        self.lazy = bool(unannotated) and set(unannotated) <= in_body
        # T.annotate_pass_configs / T.annotate_compile_flags at the top of the body
        self.function_attrs = _function_attrs(func)
        if self.lazy:
            return
        if in_body & set(unannotated):
            missing = [n for n in unannotated if n not in in_body]
            raise TypeError(f"@T.prim_func {func.__name__}: parameter {missing[0]!r} needs a "
                            f"T.Tensor/T.Buffer annotation, in the body as "
                            f"{sorted(in_body & set(unannotated))[0]!r} has (TileLang's lazy "
                            f"form) or in the signature")
        for name in self.params:
            ann = annotations.get(name)
            if ann is ptr:
                ann = PointerAnnotation()
            elif isinstance(ann, DType):
                ann = ScalarAnnotation(ann)
            elif isinstance(ann, Symbol):
                # `tokens: n` (n = T.dynamic("n")): the parameter is the symbol itself, a
                # scalar of its dtype whose value sizes the tensors that name it
                ann = ScalarAnnotation(ann.dtype, symbol=ann)
            if not isinstance(ann, (TensorAnnotation, ScalarAnnotation)) or \
                    isinstance(ann, BufferAnnotation):
                what = (" (a shared, fragment or local tile is allocated in the body; "
                        "T.SharedBuffer and its kin annotate a @T.macro's parameters)"
                        if isinstance(ann, BufferAnnotation) else "")
                raise TypeError(f"@T.prim_func {func.__name__}: parameter {name!r} needs a "
                                f"T.Tensor/T.Buffer annotation or a scalar dtype (T.int32), "
                                f"got {ann!r}{what}")
            self.annotations[name] = ann
        # what TileLang reports as the program is defined: the front end's check, which
        # reads the source (``frontend/validate.check_definition``)
        meaning("prim_func")(func)

    @property
    def attrs(self) -> dict:
        """TileLang's PrimFunc attributes: ``global_symbol`` (the function's name), the
        body's ``tilelang_pass_configs`` and ``tilelang_compile_flags`` where it annotates
        them, and ``tilelang_out_idx`` where it returns the outputs it makes with T.empty
        (the last parameters of the compiled kernel: ``[-1]`` for one); then those
        ``with_attr`` set."""
        out = {"global_symbol": self.__name__}
        out.update({k: (dict(v) if isinstance(v, dict) else list(v))
                    for k, v in self.function_attrs.items()})
        returned = returned_count(_body(self.func)) if self.lazy else 0
        if returned:
            out["tilelang_out_idx"] = list(range(-returned, 0))
        out.update(self.__dict__.get("_set_attrs", {}))
        return out

    def with_attr(self, key, value) -> "PrimFunc":
        """TVM's ``PrimFunc.with_attr``: a copy with attribute ``key`` set (the program is
        the same). ``"global_symbol"`` names the copy (TileLang's programs name each
        specialized kernel so); the others are kept for ``attrs`` and change nothing."""
        if not isinstance(key, str):
            raise TypeError(f"PrimFunc.with_attr: key must be a str, got {key!r}")
        new = object.__new__(PrimFunc)
        new.__dict__.update(self.__dict__)
        new._set_attrs = {**self.__dict__.get("_set_attrs", {}), key: value}
        if key == "global_symbol":
            if not isinstance(value, str) or not value.isidentifier():
                raise ValueError(f"PrimFunc.with_attr: global_symbol must be an identifier, "
                                 f"got {value!r}")
            new.__name__ = value
        return new

    @property
    def pass_configs(self) -> dict:
        """The pass configs the body annotates (``T.annotate_pass_configs``), or {}."""
        return dict(self.function_attrs.get(PASS_CONFIGS, {}))

    def __call__(self, *args, **kwargs):
        raise TypeError("a T.prim_func is compiled first: tilejit.compile(func) or a "
                        "@tilejit.jit factory")

"""Plain Python helpers a kernel calls, compiled inline as ``@T.macro``s.

TileLang runs a kernel's helper functions while it builds the kernel; tilejit compiles
them into it: a plain function of the user's that the kernel names (or picks from a
container at a compile-time index: ``passes/constant_subscripts.py``) becomes a
``T.macro``, and so do the user functions it calls in turn, over copies of their globals
(the module is not changed). Library functions are left alone; in simulation every
helper is an ordinary call."""
from __future__ import annotations

import ast
import dis
from types import FunctionType

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.references import current_namespace, user_function
from tilejit.frontend.source import function_def_from_file
from tilejit.frontend.shuffle_keywords import positional_shuffles
from tilejit.frontend.static_sequences import static_sequences


def is_helper(value) -> bool:
    """A plain user function (not a library's, not already a macro)."""
    return isinstance(value, FunctionType) and user_function(value) is value


def as_macro(fn: FunctionType, done: dict | None = None) -> "T.macro":
    return T.macro(_inlinable(fn, {} if done is None else done))


def helpers_as_macros(namespace: dict, names) -> None:
    """Each of ``names`` bound to a helper in ``namespace`` made a macro."""
    done: dict = {}
    for name in names:
        value = namespace.get(name)
        if is_helper(value):
            namespace[name] = as_macro(value, done)
        elif isinstance(value, T.macro) and is_helper(value.func):
            namespace[name] = as_macro(value.func, done)    # its code as kernel code holds it


def _inlinable(fn: FunctionType, done: dict) -> FunctionType:
    if fn in done:
        return done[fn]
    scope = dict(fn.__globals__)
    code = device_code(fn) or fn.__code__
    copy_ = FunctionType(code, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy_.__kwdefaults__, copy_.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    copy_.__module__ = fn.__module__
    done[fn] = copy_
    if fn.__defaults__ and any(map(is_helper, fn.__defaults__)):
        # a helper as a default argument (`def act(x, fn=square)`): inlined as one named
        copy_.__defaults__ = tuple(T.macro(_inlinable(d, done)) if is_helper(d) else d
                                   for d in fn.__defaults__)
    for name in fn.__code__.co_names:
        value = scope.get(name)
        if is_helper(value):
            scope[name] = T.macro(_inlinable(value, done))
        elif isinstance(value, T.macro) and is_helper(value.func):
            scope[name] = T.macro(_inlinable(value.func, done))
    return copy_


def device_code(fn: FunctionType):
    """``fn``'s code as kernel code holds it, or None where it is as written (or its
    source cannot be read, or it has a closure: its code is kept as it is):

    - its asserts' computed messages left out (``assert val.dtype == d, f"{val.dtype} !=
      {d}"``, TileLang's dequantizing helpers: Numba cannot format them on the device;
      the condition stays);
    - its lists of a length known from its text made tuples (``static_sequences.py``;
      a list appended to in a loop is a CompileError at its line);
    - its warp shuffles' keyword arguments by position (``shuffle_keywords.py``).

    A closure's (a helper defined in the kernel's factory, reading its sizes) is made
    inside a function that binds the same free names, so that it takes ``fn``'s cells (the
    simulator rewrites it all the same: kernel code must not be kinder)."""
    found = function_def_from_file(fn)
    if found is None:
        return None
    filename, fdef = found
    asserts = [n for n in syntax.walk(fdef) if isinstance(n, ast.Assert) and n.msg is not None
               and not isinstance(n.msg, ast.Constant)]
    for node in asserts:
        node.msg = ast.Constant(ast.unparse(node.msg))      # its source text instead
    def error(message, node):
        return CompileError(message, filename, getattr(node, "lineno", None))
    shuffles = positional_shuffles(fdef, current_namespace(fn), error)
    if not static_sequences(fdef, filename, current_namespace(fn)) and not asserts \
            and not shuffles:
        return None
    fdef.decorator_list = []
    free = fn.__code__.co_freevars
    body: list = [fdef]
    if free:
        cells = ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in free], ast.Store())],
                           ast.Tuple([ast.Constant(None)] * len(free), ast.Load()))
        outer = ast.parse("def __tj_closure():\n    pass").body[0]
        outer.body = [cells, fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
        body = [outer]
    module = syntax.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    space: dict = {}
    try:
        exec(compile(module, filename, "exec"), dict(fn.__globals__), space)  # noqa: S102
        made = space["__tj_closure"]() if free else space.get(fn.__name__)
    except Exception:       # noqa: BLE001 - as the function is written, then
        return None
    if not isinstance(made, FunctionType) or made.__code__.co_freevars != free:
        return None         # (a free name the rewrite dropped: as written, then)
    return made.__code__


# what Numba cannot compile in an inlined helper and fails on without saying where
_NOT_INLINABLE = {ast.Try: "try/except", ast.Yield: "yield", ast.YieldFrom: "yield from",
                  ast.Await: "await"}
if hasattr(ast, "TryStar"):
    _NOT_INLINABLE[ast.TryStar] = "try/except*"


def helper_problem(fn: FunctionType) -> CompileError | None:
    """The first construct of a helper ``fn`` (the device program) calls, directly or
    through other helpers and macros, that kernel code cannot hold (try/except, a
    ``**kwargs`` parameter, print(), …), as a CompileError at its line; None when there
    is none. For a compilation that failed inside Numba without saying where."""
    # breaking a circle: source.py imports tile_helpers.py, which imports this module
    from tilejit.frontend.source import function_def_from_file
    seen = {fn.__code__}
    pending = [fn]
    while pending and len(seen) < 64:
        caller = pending.pop()
        for name in sorted(_code_names(caller.__code__)):
            value = caller.__globals__.get(name)
            target = value.func if isinstance(value, T.macro) else value
            if not is_helper(target) or target.__code__ in seen:
                continue
            seen.add(target.__code__)
            pending.append(target)
            found = function_def_from_file(target, copy_tree=False)
            if found is None:
                continue
            filename, fdef = found
            unknown = _unknown_language_attribute(fdef, current_namespace(target))
            if unknown is not None:
                # validate.py imports this module's neighbours (a circle broken here)
                from tilejit.frontend.validate import unknown_language_name_message
                return CompileError(unknown_language_name_message(unknown), filename,
                                    unknown.lineno)
            what, line = _not_inlinable(fdef)
            if what is not None:
                return CompileError(f"unsupported in {target.__qualname__}(), a helper the "
                                    f"kernel calls: {what}; a helper is compiled inline as "
                                    "kernel code, which cannot hold it", filename, line)
    return None


def recursive_helper(fn: FunctionType) -> CompileError | None:
    """A helper (or ``@T.macro``) ``fn`` calls, directly or through others, that calls
    itself: kernel code has no recursion (helpers compile inline), as a CompileError at
    the helper's definition naming the cycle; None when there is none."""
    from tilejit.frontend.source import function_def_from_file    # (the circle above)

    def callees(f):
        cells = []
        for c in f.__closure__ or ():
            try:
                cells.append(c.cell_contents)
            except ValueError:          # an empty cell
                pass
        out = []
        for value in [f.__globals__.get(n) for n in sorted(_global_loads(f.__code__))] + cells:
            value = value.func if isinstance(value, T.macro) else value
            if is_helper(value) and value not in out:
                out.append(value)
        return out

    path, done = [], set()

    def visit(f):
        if f.__code__ in done or len(done) > 256:
            return None
        if any(g.__code__ is f.__code__ for g in path):
            cycle = path[[g.__code__ for g in path].index(f.__code__):] + [f]
            found = function_def_from_file(f, copy_tree=False)
            filename, line = (found[0], found[1].lineno) if found else (
                f.__code__.co_filename, f.__code__.co_firstlineno)
            names = " → ".join(g.__name__ for g in cycle)
            return CompileError(f"{f.__qualname__}() calls itself ({names}): kernel code has "
                                f"no recursion (a helper is compiled inline); repeat it "
                                f"with a loop over a compile-time count (T.unroll)",
                                filename, line)
        path.append(f)
        for g in callees(f):
            problem = visit(g)
            if problem is not None:
                return problem
        path.pop()
        done.add(f.__code__)
        return None

    return visit(fn)


def _unknown_language_attribute(fdef, namespace):
    """The first ``T.<name>`` of ``fdef`` that tilejit.language does not have, or None."""
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                namespace.get(node.value.id) is T and not hasattr(T, node.attr):
            return node
    return None


def _not_inlinable(fdef: ast.FunctionDef):
    if fdef.args.kwarg is not None:
        return f"a **{fdef.args.kwarg.arg} parameter", fdef.lineno
    for stmt in fdef.body:
        for node in syntax.walk(stmt):
            what = _NOT_INLINABLE.get(type(node))
            if what is not None:
                return what, node.lineno
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "print":
                return ("print() (use T.print(value, msg), which prints a number)",
                        node.lineno)
    return None, None


def _global_loads(code) -> set:
    """The global names ``code`` (and the code nested in it) loads: not its attribute
    names (``T.ieee_add`` names no global ``ieee_add``)."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            names |= _global_loads(const)
    return names


def _code_names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


class HelperArgument:
    """A function or ``@T.macro`` of the user's given for a compile-time parameter
    (TileLang's eager ``element_wise(A, add_one)``): the kernel calls it as a helper of
    its own, inlined (``binding``). Equal for the same function; its repr, which the disk
    cache's key holds, names it with ``key`` (``runtime/host._fingerprint``: a digest of
    its source and what it reads)."""
    __slots__ = ("fn", "_text")
    _made: dict = {}            # id(fn) -> HelperArgument (which keeps fn alive)

    @classmethod
    def of(cls, fn, key) -> "HelperArgument":
        """The one for ``fn``, made (``key(fn)`` its digest) the first time."""
        made = cls._made.get(id(fn))
        if made is None or made.fn is not fn:
            made = cls._made[id(fn)] = cls(fn, key(fn))
        return made

    def __init__(self, fn, key: str):
        self.fn = fn
        name = getattr(user_function(fn), "__qualname__", type(fn).__name__)
        self._text = f"helper {name} {key}"

    def __eq__(self, other):
        return isinstance(other, HelperArgument) and other.fn is self.fn

    def __hash__(self):
        return hash(id(self.fn))

    def __repr__(self):
        return self._text


def binding(value):
    """What a compile-time value is to the kernel's code: a helper argument's function,
    else the value."""
    return value.fn if isinstance(value, HelperArgument) else value

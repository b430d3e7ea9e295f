"""Attribute chains a kernel reads through a global or closure name, folded to their
values before typing (SPEC "Globals").

Numba types an attribute chain through modules (``T.float16``, ``math.pi``) but not
through an object of the user's: ``cfg.BLOCK`` on a ``types.SimpleNamespace``, a
dataclass or a class attribute ``C.SCALE`` is an "Untyped global name" there. The
device program reads such a chain as a global of its own instead
(``__tj_attr_cfg_BLOCK``), bound to the chain's value when the specialization is
compiled, so it types as a global of that value would: an int is a compile-time
constant (a ``T.Parallel`` extent, a tile shape), a float a weak scalar. A chain
through modules only is folded the same way when its value is a number, a string or a
tuple of them (Numba would type an int read through a module as a run-time int64) or a
helper function of the user's (inlined as a ``@T.macro``). The ``@T.macro`` helpers the
program calls are rebuilt from their source with their own chains folded, over a copy of
their globals in which the plain helpers they call are macros too (as the kernel's are:
``helpers.py``).

What a chain through an object may lead to: a number, bool, str, None, a tuple or list
of those, a numpy scalar, a dtype (tilejit's, numpy's or torch's, or a numpy scalar
type), a ``@T.macro`` or function (an ``IntEnum`` member is its int). Anything else (a
method, an array, an arbitrary object) is a ``CompileError`` naming the chain and its
value's type. The simulator runs the chains as Python; its type check is this program's.
"""
from __future__ import annotations

import ast
import enum
import re
import types

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.helpers import as_macro, is_helper
from tilejit.frontend.object_arguments import (callee_function, drop_parameters,
                                               object_parameters, without_parameters)
from tilejit.frontend.references import LIBRARY_MODULES, current_namespace, user_function
from tilejit.language.dtypes import as_dtype, is_torch_dtype

PREFIX = "__tj_attr_"


def fold_attribute_chains(fdef: ast.FunctionDef, namespace: dict, error) -> ast.FunctionDef:
    """``fdef`` (the device program) with each attribute chain it reads through an
    object (or through modules, to a number or a helper) replaced by a global of
    ``namespace`` bound to the chain's value; the ``@T.macro`` helpers it calls by name
    are rebuilt with their own chains folded. ``error(message, node)`` makes the
    CompileError at the kernel's line."""
    memo: dict = {}
    folder = _ChainFolder(fdef, namespace, error, memo)
    fdef = folder.visit(fdef)
    _fold_called_macros(_loaded_names(fdef), namespace, memo)
    return fdef


class _ChainFolder(syntax.NodeTransformer):
    def __init__(self, fdef, namespace, error, memo):
        self.namespace = namespace
        self.error = error
        self.memo = memo              # function -> its folded T.macro (None: unchanged)
        self.local = _bound_names(fdef)
        self.outside = set(namespace) - self.local
        self.bound: dict[str, str] = {}     # "cfg.BLOCK" -> the global's name
        self.changed = False

    def visit_Attribute(self, node):
        if not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        chain, base = [], node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in self.outside:
            return self.generic_visit(node)
        chain.reverse()
        values = [self.namespace[base.id]]
        for i, attr in enumerate(chain):
            try:
                values.append(getattr(values[-1], attr))
            except Exception:   # noqa: BLE001 - a missing attribute, a property that fails
                if not _through_module_or_library(values + [None]):
                    dotted = ".".join([base.id, *chain[:i]])
                    raise self.error(
                        f"`{dotted}` ({_describe(values[-1])}) has no attribute "
                        f"{attr!r}", node) from None
                return node          # Numba reports what a module lacks
        dotted = ".".join([base.id, *chain])
        value = self._fold(dotted, values, base.id, node)
        if value is _LEAVE:
            return node
        name = self.bound.get(dotted)
        if name is None:
            name = _global_name(dotted, self.namespace)
            self.namespace[name] = value
            self.bound[dotted] = name
        self.changed = True
        return ast.copy_location(ast.Name(name, ast.Load()), node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.func, ast.Name) or node.func.id not in self.namespace or \
                node.func.id in self.local:
            return node
        fn = callee_function(self.namespace[node.func.id])
        fixed = fn and object_parameters(
            fn, node, lambda n: None if n in self.local else self.namespace.get(n))
        if not fixed:
            return node
        special = _specialized_macro(fn, fixed, self.memo)
        if special is None:
            return node
        name = _global_name(f"{fn.__name__}.objects", self.namespace)
        self.namespace[name] = special
        self.changed = True
        return without_parameters(node, fn, fixed, name)

    def _fold(self, dotted, values, root, node):
        """The value the chain's global is bound to, or _LEAVE (Numba types it)."""
        value = values[-1]
        callee = _as_callee(value, self.memo)
        if all(isinstance(v, types.ModuleType) for v in values[:-1]):
            if _plain_constant(value):
                return _frozen(value)
            return _LEAVE if callee is None or callee is value else callee
        if _through_module_or_library(values):
            return _LEAVE        # T.GemmWarpPolicy.Square, a dtype's .bits: typed as they are
        if callee is not None:
            return callee
        if _foldable(value):
            return _converted(value)
        raise self.error(_not_foldable_message(dotted, value, values[0], root), node)


_LEAVE = object()


def _bound_names(fdef) -> set:
    """The names ``fdef`` binds anywhere (parameters, assignments, loop targets, nested
    definitions): not globals, wherever they are read. (``references.outside_uses``
    needs every node's line, which the nodes the rewrites made lack.)"""
    bound = set()
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node is not fdef:
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _through_module_or_library(values) -> bool:
    """Whether the first value of the chain that is not a module is a library's (a
    class or an object of tilejit, numpy, torch, …: typed as it is)."""
    for value in values[:-1]:
        if isinstance(value, types.ModuleType):
            continue
        owner = value if isinstance(value, type) else type(value)
        if getattr(owner, "compile_time_fields", False):
            return False        # a library object read as the user's (the MMA emitter)
        module = (getattr(owner, "__module__", None) or "").split(".")[0]
        return module in LIBRARY_MODULES and module != "builtins"
    return True


def _plain_constant(value) -> bool:
    """A number, string or tuple of them that a module holds: folded so that it types
    as the same global would (an int a compile-time constant)."""
    if type(value) in (int, float, bool, str) or isinstance(value, np.generic):
        return True
    return type(value) is tuple and all(_plain_constant(v) for v in value)


def _foldable(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, np.generic, np.dtype)):
        return True
    if isinstance(value, type) and issubclass(value, np.generic):
        return True
    if isinstance(value, (tuple, list)):
        return all(_foldable(v) for v in value)
    return is_torch_dtype(value)


def _converted(value):
    if is_torch_dtype(value):
        return as_dtype(value)
    return _frozen(value)


def _frozen(value):
    """A list as a tuple (the device cannot change the host's list), recursively; an
    ``enum.IntEnum`` member as its int (Numba has no constants of its type)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, enum.Enum) and isinstance(value, int):
        return int(value)
    return value


def _as_callee(value, memo):
    """What a kernel calls through the chain: a @T.macro (rebuilt with its chains
    folded), a helper of the user's (inlined as a macro) or a library function; None
    when ``value`` is none of these (a bound method among them)."""
    if isinstance(value, T.macro) or is_helper(value):
        return _folded_macro(value, memo) or (value if isinstance(value, T.macro)
                                              else as_macro(value))
    if isinstance(value, types.FunctionType):
        return value if user_function(value) is None else None
    if isinstance(value, types.BuiltinFunctionType) and (
            getattr(value, "__self__", None) is None or
            isinstance(value.__self__, types.ModuleType)):
        return value            # math.exp
    if isinstance(value, np.ufunc):
        return value
    return None


def _describe(value) -> str:
    if isinstance(value, types.MethodType):
        return f"a method of {_type_name(type(value.__self__))}"
    if isinstance(value, type):
        return f"the class {_type_name(value)}"
    if isinstance(value, np.ndarray):
        return f"a numpy.ndarray ({value.dtype}, shape {value.shape})"
    name = _type_name(type(value))
    if "." in name:
        return f"an instance of {name}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _type_name(cls) -> str:
    module = getattr(cls, "__module__", "builtins")
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _not_foldable_message(dotted, value, root_value, root) -> str:
    what = (f"`{dotted}` is {_describe(value)} (read through {root}, "
            f"{_describe(root_value)}): a kernel compiles what it reads through an "
            "object's attributes as constants, which must be numbers, bools, strings, "
            "None, tuples of them, numpy scalars or dtypes (or a @T.macro or function "
            "to call)")
    if callable(value):
        return (what + "; a kernel cannot call an object's method: call a @T.macro or a "
                "helper function by its name, and pass the object's values to it as "
                "arguments")
    return (what + "; pass the value as an argument instead (a tensor parameter for an "
            "array, a T.constexpr parameter for a compile-time value)")


def _global_name(dotted: str, namespace: dict) -> str:
    base = PREFIX + re.sub(r"\W", "_", dotted.replace(".", "_"))
    name, n = base, 1
    while name in namespace:
        n += 1
        name = f"{base}_{n}"
    return name


# -- @T.macro helpers ------------------------------------------------------------------
def _loaded_names(fdef) -> set:
    """The global names ``fdef`` reads: not those it assigns (its own, as in Python,
    whatever the module binds them to)."""
    names = [node for node in syntax.walk(fdef) if isinstance(node, ast.Name)]
    local = {node.id for node in names if isinstance(node.ctx, ast.Store)}
    local |= {a.arg for a in fdef.args.args} if isinstance(fdef, ast.FunctionDef) else set()
    return {node.id for node in names if isinstance(node.ctx, ast.Load)} - local


def _code_names(code: types.CodeType) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _fold_called_macros(names, namespace: dict, memo) -> bool:
    """Each of ``names`` that ``namespace`` binds to a macro whose body (or a macro it
    calls) reads a chain, replaced by its folded copy, and each bound to a plain helper
    by a macro of it (a @T.macro's own helpers are inlined as the kernel's are); whether
    any was."""
    changed = False
    for name in names:
        value = namespace.get(name)
        if isinstance(value, T.macro) or is_helper(value):
            folded = _folded_macro(value, memo)
            if folded is None and is_helper(value):
                folded = as_macro(value)
            if folded is not None:
                namespace[name] = folded
                changed = True
    return changed


def _folded_macro(value, memo):
    """A new ``T.macro`` of ``value``'s function (a macro or a plain helper) over a copy
    of its globals, compiled from its source with its attribute chains folded and the
    macros and helpers it calls folded in turn; None when nothing in it needed that
    (then Numba compiles it as it is). Without its source only the callees are."""
    # breaking a circle: source.py imports the module this one imports (references.py)
    from tilejit.frontend.source import function_def_from_file
    fn = value.func if isinstance(value, T.macro) else value
    if not isinstance(fn, types.FunctionType):
        return None
    if fn in memo:
        return memo[fn]
    memo[fn] = None                  # a macro that calls itself: folded once
    namespace = current_namespace(fn)
    found = function_def_from_file(fn)
    code, closure = fn.__code__, fn.__closure__
    if found is not None:
        filename, fdef = found

        def error(message, node):
            return CompileError(message, filename, getattr(node, "lineno", None))
        folder = _ChainFolder(fdef, namespace, error, memo)
        fdef = folder.visit(fdef)
        called = _fold_called_macros(_loaded_names(fdef), namespace, memo)
        if not (folder.changed or called):
            return None
        fdef.decorator_list = []
        try:
            module = compile(syntax.fix_missing_locations(ast.Module([fdef], [])), filename,
                             "exec")
            # its closure's values are globals of the copy (current_namespace)
            code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
            closure = None
        except SyntaxError:          # e.g. `nonlocal`, which needs its enclosing function
            if not called:
                return None
    elif not _fold_called_macros(_code_names(code), namespace, memo):
        return None
    new = types.FunctionType(code, namespace, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__, new.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    new.__module__ = fn.__module__
    memo[fn] = T.macro(new)
    return memo[fn]


def _specialized_macro(fn, fixed: dict, memo):
    """A ``T.macro`` of ``fn`` without the parameters of ``fixed``, its body reading each
    as a global bound to its object (``object_arguments.py``), chains folded; one per
    function and objects; None without its source."""
    # breaking a circle: source.py imports the module this one imports (references.py)
    from tilejit.frontend.source import function_def_from_file
    key = (fn, tuple(sorted((k, id(v)) for k, v in fixed.items())))
    if key in memo:
        return memo[key][0]
    found = function_def_from_file(fn)
    if found is None:
        return None
    filename, fdef = found
    defaults, kwdefaults = drop_parameters(fdef, fn, fixed)
    namespace = current_namespace(fn)
    namespace.update(fixed)
    memo[key] = (None, fixed)           # (keeps the objects alive while the key holds ids)

    def error(message, node):
        return CompileError(message, filename, getattr(node, "lineno", None))
    fdef = _ChainFolder(fdef, namespace, error, memo).visit(fdef)
    _fold_called_macros(_loaded_names(fdef), namespace, memo)
    fdef.decorator_list = []
    try:
        module = compile(syntax.fix_missing_locations(ast.Module([fdef], [])), filename,
                         "exec")
    except SyntaxError:         # e.g. `nonlocal`, which needs its enclosing function
        return None
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    new = types.FunctionType(code, namespace, fn.__name__, defaults, None)
    new.__kwdefaults__, new.__qualname__ = kwdefaults, fn.__qualname__
    new.__module__ = fn.__module__
    memo[key] = (T.macro(new), fixed)
    return memo[key][0]

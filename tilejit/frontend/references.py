"""What a function reads from outside itself: the global and closure values its body
names, and the attribute chains rooted at them (``cfg.BLOCK``, ``T.float16``), each with
its line. A kernel's first compilation checks them (``source.KernelSource.resolve``); the
disk cache's key digests them, and those of the user functions they lead to
(``runtime/disk_cache.function_fingerprint``)."""
from __future__ import annotations

import ast
import types
from dataclasses import dataclass

import numpy as np

from tilejit import syntax
from tilejit.errors import CompileError

# functions of these packages are library code, named rather than followed
LIBRARY_MODULES = ("tilejit", "numpy", "torch", "numba", "llvmlite", "builtins")
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Read:
    """One outside value a function reads: ``name`` is the name or the resolved part of
    an attribute chain (``cfg.BLOCK``); ``root`` is the named value itself."""
    kind: str               # "global" or "closure"
    name: str
    value: object
    root: object
    line: int | None


def user_function(value):
    """The user function behind ``value`` (through ``__wrapped__``, ``.func``, a bound
    method's ``__func__``: a ``@T.macro``, ``functools.wraps``), or None (a library
    function or not a function)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(value, types.FunctionType):
            module = getattr(value, "__module__", None) or ""
            return None if module.split(".")[0] in LIBRARY_MODULES else value
        inner = None
        for attr in ("__wrapped__", "func", "__func__"):
            try:
                candidate = getattr(value, attr, None)
            except Exception:  # a property that fails
                candidate = None
            if candidate is not None and candidate is not value:
                inner = candidate
                break
        if inner is None:
            return None
        value = inner
    return None


def current_namespace(func) -> dict:
    """``func``'s globals and closure values as they are now (a copy)."""
    ns = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                ns[name] = cell.cell_contents
            except ValueError:   # a cell not filled yet
                pass
    return ns


def _parameters(args: ast.arguments) -> list[str]:
    every = args.posonlyargs + args.args + args.kwonlyargs + \
        [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


def outside_uses(fdef: ast.FunctionDef):
    """(name, attribute chain, line) per load of a name the function's body does not
    bind, in source order; the chain is the attributes read from it (``[]`` for a bare
    use). One pass over the body (decorators and defaults are not its program)."""
    local = set(_parameters(fdef.args))
    loads = []
    stack = list(reversed(fdef.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute):
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                loads.append((base.id, chain[::-1], base.lineno))
            else:
                stack.append(base)
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.append((node.id, [], node.lineno))
            else:
                local.add(node.id)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                local.add(node.name)
            local.update(_parameters(node.args))
        elif isinstance(node, ast.ClassDef):
            local.add(node.name)
        elif isinstance(node, ast.alias):
            local.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        stack.extend(reversed(list(syntax.iter_child_nodes(node))))
    uses, seen = [], set()
    for name, chain, line in sorted(loads, key=lambda u: u[2]):
        key = (name, *chain)
        if name not in local and key not in seen:
            seen.add(key)
            uses.append((name, chain, line))
    return uses


def _code_names(code: types.CodeType) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def code_uses(code: types.CodeType):
    """``outside_uses`` for a function without source: every name of its bytecode (no
    attribute chains, no lines)."""
    return [(name, [], None) for name in sorted(_code_names(code))]


def function_reads(func, fdef: ast.FunctionDef | None = None,
                   namespace: dict | None = None, uses=None) -> list[Read]:
    """The outside values ``func`` reads, once each, in source order. ``fdef``: its
    syntax tree (without it, the names of its bytecode, without attribute chains or
    lines); ``uses``: ``outside_uses(fdef)`` if already known; ``namespace``: where names
    are looked up (default: ``func``'s globals and closure now). Names found nowhere
    (builtins, or not defined) are left out."""
    ns = current_namespace(func) if namespace is None else namespace
    freevars = set(func.__code__.co_freevars)
    if uses is None:
        uses = code_uses(func.__code__) if fdef is None else outside_uses(fdef)
    out, seen = [], set()
    for name, chain, line in uses:
        if name not in ns:
            continue
        root = value = ns[name]
        resolved = [name]
        for attr in chain:
            try:
                value = getattr(value, attr)
            except Exception:   # not there (yet): the compiler reports it where it matters
                break
            resolved.append(attr)
        dotted = ".".join(resolved)
        if dotted in seen:
            continue
        seen.add(dotted)
        out.append(Read("closure" if name in freevars else "global", dotted, value, root,
                        line))
    return out


def is_array(value) -> bool:
    """An array or tensor (numpy, torch, anything exporting an array interface or
    DLPack), not a numpy scalar and not a class."""
    if isinstance(value, np.ndarray):
        return True
    if isinstance(value, (type, np.generic)):
        return False
    return any(hasattr(value, a) for a in ("__cuda_array_interface__", "__dlpack__",
                                           "__array_interface__"))


def _describe_array(value) -> str:
    kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    details = ", ".join(str(x) for x in (dtype, None if shape is None else
                                         f"shape {tuple(shape)}") if x is not None)
    return f"a {kind}" + (f" ({details})" if details else "")


def check_reads(func, reads: list[Read], filename: str, what: str) -> None:
    """Raise a CompileError for an array or tensor among ``reads`` (what ``func``, the
    kernel, reads: ``function_reads``) or read by global or closure name by a user
    function it calls, named ``what`` in the message: tilejit does not bake arrays into
    kernels."""
    # breaking a circle: source.py imports this module
    from tilejit.frontend.source import function_def_from_file
    pending = [(reads, filename, what)]
    visited = {func.__code__}
    while pending:
        reads, filename, what = pending.pop()
        for read in reads:
            for value, label in ((read.root, read.name.split(".")[0]), (read.value, read.name)):
                if is_array(value):
                    raise CompileError(
                        f"{what} reads the {read.kind} {label}, {_describe_array(value)}: "
                        "tilejit does not compile arrays or tensors into a kernel; pass it "
                        "as an argument (a tensor parameter) instead", filename, read.line)
            callee = user_function(read.value)
            if callee is not None and callee.__code__ not in visited and \
                    len(visited) < 64:
                visited.add(callee.__code__)
                found = function_def_from_file(callee, copy_tree=False)
                pending.append((function_reads(callee, found[1] if found else None),
                                found[0] if found else callee.__code__.co_filename,
                                f"{callee.__qualname__} (called by {what})"))

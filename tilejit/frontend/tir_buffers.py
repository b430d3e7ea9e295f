"""TVM's ``T.alloc_buffer(shape, dtype, scope=...)``, which TileLang re-exports, written
as the allocation its scope names, before anything reads the kernel (the sequence
check, the front end): "global" (TVM's default) ``T.alloc_global`` (a scratch tensor the
launches share, declared before the first ``with T.Kernel``: ``runtime/sequence.py``),
"shared" and "shared.dyn" ``T.alloc_shared``, "local" ``T.alloc_local``,
"local.fragment" ``T.alloc_fragment``. A declaration annotated as TileLang's examples
write it (``part: T.Tensor((S, N), dtype) = T.alloc_buffer(...)``) becomes a plain
assignment. Another scope, or TVM's other arguments (``data=``, ``strides=``, ...),
is a ``CompileError`` at the call."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.source import is_launch, resolve_static

SCOPES = {"global": "alloc_global", "shared": "alloc_shared", "shared.dyn": "alloc_shared",
          "local": "alloc_local", "local.fragment": "alloc_fragment"}


def rewrite_alloc_buffers(filename: str, fdef: ast.FunctionDef, namespace) -> None:
    """Each ``T.alloc_buffer`` call of ``fdef`` (in place) as its scope's allocation."""
    for node in syntax.walk(fdef):
        for i, stmt in enumerate(getattr(node, "body", None) or []):
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and \
                    isinstance(stmt.target, ast.Name) and _is_alloc_buffer(stmt.value,
                                                                           namespace):
                node.body[i] = ast.copy_location(
                    ast.Assign([stmt.target], stmt.value), stmt)
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Call) and _is_alloc_buffer(node, namespace):
            _rewrite(filename, node)


def hoist_global_allocations(filename: str, fdef: ast.FunctionDef, namespace) -> None:
    """A ``X = T.alloc_global(...)`` statement at the top of a ``with T.Kernel`` block's
    body moved before the block, where a scratch tensor the launch uses is declared
    (TileLang makes it a workspace the host allocates: a persistent kernel's grid-wide
    scratch, btorch's GLIF3 SpMV). Its shape may read only names bound before the
    block (a CompileError at its line otherwise); one deeper in the body is left to the
    sequence's own check (``runtime/sequence.py``)."""
    for index in range(len(fdef.body) - 1, -1, -1):
        stmt = fdef.body[index]
        if not (isinstance(stmt, ast.With) and any(
                is_launch(item.context_expr, namespace) for item in stmt.items)):
            continue
        bound = {n.id for item in stmt.items if item.optional_vars is not None
                 for n in syntax.walk(item.optional_vars) if isinstance(n, ast.Name)}
        hoisted = []
        for inner in list(stmt.body):
            if not _is_global_allocation(inner, namespace):
                continue
            bound |= {n.id for s in stmt.body[:stmt.body.index(inner)] for n in syntax.walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if any(isinstance(n, ast.Name) and n.id in bound for n in syntax.walk(inner.value)):
                raise CompileError("T.alloc_global in a `with T.Kernel` block: its shape and "
                                   "dtype may read only names bound before the block (the "
                                   "scratch tensor is allocated before the launch)",
                                   filename, inner.lineno)
            stmt.body.remove(inner)
            hoisted.append(inner)
        fdef.body[index:index] = hoisted


def _is_global_allocation(stmt, namespace) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
        stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call) and resolve_static(
        stmt.value.func, namespace) is T.alloc_global


def _is_alloc_buffer(node, namespace) -> bool:
    return isinstance(node, ast.Call) and resolve_static(node.func, namespace) is T.alloc_buffer


def _rewrite(filename, call: ast.Call) -> None:
    def error(msg):
        return CompileError(f"T.alloc_buffer: {msg}", filename, call.lineno)

    names = ("shape", "dtype", "data", "strides", "elem_offset", "scope")
    given = dict(zip(names, call.args))
    for kw in call.keywords:
        if kw.arg is None or kw.arg in given:
            raise error(f"argument {kw.arg or '**'!r} given twice or unpacked")
        given[kw.arg] = kw.value
    extra = sorted(set(given) - {"shape", "dtype", "scope"})
    if extra:
        raise error(f"TVM's argument(s) {', '.join(extra)} are not supported by tilejit "
                    f"(a buffer is its shape, dtype and scope)")
    if "shape" not in given:
        raise error("missing the shape")
    scope = given.get("scope", ast.Constant("global"))
    if not (isinstance(scope, ast.Constant) and scope.value in SCOPES):
        text = ast.unparse(scope)
        raise error(f"scope {text} is not one tilejit allocates (expected one of "
                    f"{', '.join(map(repr, SCOPES))})")
    if not isinstance(call.func, ast.Attribute):
        raise error("write it as an attribute of the language module (T.alloc_buffer), "
                    "which tilejit reads as the allocation its scope names")
    call.func = ast.copy_location(ast.Attribute(call.func.value, SCOPES[scope.value],
                                                ast.Load()), call.func)
    call.args = [given["shape"]] + ([given["dtype"]] if "dtype" in given else
                                    [ast.Constant("float32")])
    call.keywords = []


__all__ = ["rewrite_alloc_buffers", "hoist_global_allocations"]

"""Front end: TileLang's warp shuffles with keywords, ``T.shfl_xor(v, delta, width=w,
mask=m)`` (TileOPs' arg-reductions, Birkhoff projections), by position: the typing takes
the arguments in order, a width left out 32. The kernel's own calls (``rewrite.
_DeviceForms``) and those of the plain helpers it inlines (``helpers.device_code``)
alike."""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.source import bound_arguments, resolve_static

SHUFFLES = {T.shfl_xor: ("value", "delta", "width", "mask"),
            T.shfl_down: ("value", "delta", "width", "mask"),
            T.shfl_up: ("value", "delta", "width", "mask"),
            T.shfl_sync: ("value", "src_lane", "width", "mask")}


def positional_shuffle(node: ast.Call, target, error) -> ast.Call:
    """``node``, a call of ``target`` (one of ``SHUFFLES``), with its arguments by
    position; ``error(message, node)`` makes the CompileError of a wrong argument."""
    names = SHUFFLES[target]
    given = bound_arguments(node, names, lambda arg: error(
        f"T.{target.__name__}({', '.join(names)}): unexpected or repeated argument "
        f"{arg!r}", node))
    if names[1] not in given or names[0] not in given:
        raise error(f"T.{target.__name__} needs {names[0]} and {names[1]}", node)
    if "mask" in given:
        given.setdefault("width", ast.Constant(32))
    node.args = [given[n] for n in names if n in given]
    node.keywords = []
    return node


def positional_shuffles(fdef: ast.FunctionDef, namespace, error) -> bool:
    """Every shuffle with keywords in ``fdef`` by position, in place; whether there was
    one."""
    calls = [n for n in syntax.walk(fdef) if isinstance(n, ast.Call) and n.keywords
             and resolve_static(n.func, namespace) in SHUFFLES]
    for call in calls:
        positional_shuffle(call, resolve_static(call.func, namespace), error)
    return bool(calls)

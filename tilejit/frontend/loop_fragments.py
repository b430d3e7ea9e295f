"""What a ``T.Parallel`` loop does with fragments, read off the source (before tiles are
planned): the names a kernel allocates with ``T.alloc_fragment``, and each subscript of
one in a loop's body with the loop indices it names (``parallel_order.py``,
``accumulating_loops.py``)."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static


def fragment_names(tree: ast.AST, namespace) -> set:
    """The names ``name = T.alloc_fragment(...)`` binds in ``tree``."""
    return {node.targets[0].id for node in syntax.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
            and resolve_static(node.value.func, namespace) is T.alloc_fragment}


def parallel_names(loop: ast.For, namespace) -> list | None:
    """The index names of ``for i, j in T.Parallel(a, b)`` (plain, distinct, one per
    extent, no starred extents), or None for any other loop."""
    if not (isinstance(loop.iter, ast.Call) and
            resolve_static(loop.iter.func, namespace) is T.Parallel):
        return None
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    names = [t.id if isinstance(t, ast.Name) else None for t in targets]
    if None in names or len(set(names)) != len(names) or \
            len(loop.iter.args) != len(names) or \
            any(isinstance(a, ast.Starred) for a in loop.iter.args):
        return None
    return names


def fragment_subscripts(loop: ast.For, fragments, names):
    """(subscript, its indices, the loop index each names or None) of every fragment
    element the loop's body reads or writes."""
    for stmt in loop.body:
        for sub in syntax.walk(stmt):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) \
                    and sub.value.id in fragments:
                elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                yield sub, elts, [e.id if isinstance(e, ast.Name) and e.id in names else None
                                  for e in elts]

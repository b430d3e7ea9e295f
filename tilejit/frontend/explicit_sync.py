"""Hopper's explicit synchronization forms in a kernel's source: ``T.alloc_barrier``,
``T.mbarrier_wait_parity``, ``T.mbarrier_arrive``, ``T.tma_copy`` and ``with T.ws(k):``.

The simulator gives them their meaning (``sim/roles.py``: mbarrier phases, warpgroup
roles run as coroutines); ``passes/warp_roles.py`` lowers them for the GPU (sm_90+).
The simulator skips the GPU compilation it otherwise runs first as a check
(``runtime/kernel.py``): its ``T.ws`` roles are coroutines, not warpgroups.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

EXPLICIT = {T.alloc_barrier: "T.alloc_barrier", T.mbarrier_wait_parity: "T.mbarrier_wait_parity",
            T.mbarrier_arrive: "T.mbarrier_arrive", T.tma_copy: "T.tma_copy", T.ws: "T.ws"}


def is_ws(node: ast.AST, namespace) -> bool:
    """``with T.ws(...):``"""
    return (isinstance(node, ast.With) and len(node.items) == 1
            and isinstance(node.items[0].context_expr, ast.Call)
            and resolve_static(node.items[0].context_expr.func, namespace) is T.ws)


def explicit_forms(tree: ast.AST, namespace) -> list[tuple[str, ast.AST]]:
    """(name, node) of each explicit form the tree uses, in source order."""
    found = []
    for node in syntax.walk(tree):
        if isinstance(node, ast.Call):
            name = EXPLICIT.get(resolve_static(node.func, namespace))
            if name is not None:
                found.append((name, node))
    return sorted(found, key=lambda f: (f[1].lineno, f[1].col_offset))


def uses_warp_roles(tree: ast.AST, namespace) -> bool:
    """Whether the kernel splits its block into ``T.ws`` roles."""
    return any(is_ws(node, namespace) for node in syntax.walk(tree))

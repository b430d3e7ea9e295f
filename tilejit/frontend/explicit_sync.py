"""Hopper's explicit synchronization forms in a kernel's source: ``T.alloc_barrier``,
``T.mbarrier_wait_parity``, ``T.mbarrier_arrive``, ``T.tma_copy`` and ``with T.ws(k):``.

The simulator gives them their meaning (``sim/roles.py``: mbarrier phases, warpgroup
roles run as coroutines); the GPU does not lower them yet, so the device program of a
kernel that uses one is refused here with the line (``reject_on_gpu``, called by
``rewrite.device_tree``), and the simulator skips the GPU compilation it otherwise runs
first as a check (``runtime/kernel.py``).
"""
from __future__ import annotations

import ast

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
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = EXPLICIT.get(resolve_static(node.func, namespace))
            if name is not None:
                found.append((name, node))
    return sorted(found, key=lambda f: (f[1].lineno, f[1].col_offset))


def uses_warp_roles(tree: ast.AST, namespace) -> bool:
    """Whether the kernel splits its block into ``T.ws`` roles."""
    return any(is_ws(node, namespace) for node in ast.walk(tree))


def reject_on_gpu(tree: ast.AST, namespace, error) -> None:
    """A CompileError at the first explicit form: not lowered for the GPU yet."""
    found = explicit_forms(tree, namespace)
    if found:
        name, node = found[0]
        raise error(f"{name} is not yet lowered for the GPU (tilejit runs it in the "
                    "simulator: CPU tensors or target='sim'); T.Persistent, T.Pipelined and "
                    "T.copy compile, and on sm_90 T.Pipelined copies use TMA and mbarriers by "
                    "themselves", node)

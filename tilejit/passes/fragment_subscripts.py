"""Reading a fragment's subscripts inside ``T.Parallel`` loops: which of the loop's
indices a subscript uses, and how (all of them in order, a subset, or in part with fixed
positions). Shared by layout inference (``layout_inference.py``) and the whole-fragment
rules (``whole_fragments.py``)."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static


def loop_names(target) -> list[str] | None:
    elts = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(e, ast.Name) for e in elts):
        return None
    return [e.id for e in elts]


def index_names(sub: ast.Subscript):
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    return [e.id if isinstance(e, ast.Name) else None for e in elts]


def constant_index(sub: ast.Subscript):
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if all(isinstance(e, ast.Constant) and isinstance(e.value, int) for e in elts):
        return tuple(e.value for e in elts)
    return None


def dropped_positions(idx, loop_vars):
    """The loop positions a fragment subscript leaves out when it uses a proper,
    in-order subset of the loop's indices (``F[i]`` in a loop over ``i, j``); else
    None."""
    if None in idx or len(idx) >= len(loop_vars) or not idx:
        return None
    it = iter(loop_vars)
    if not all(any(v == x for x in it) for v in idx):
        return None
    return tuple(k for k, v in enumerate(loop_vars) if v not in idx)


def partial_positions(sub, loop_vars, varying):
    """The positions of a fragment subscript that are fixed within the loop when it indexes
    part of the fragment (``F[k, j]`` in a loop over ``j``, k from a serial loop or a
    constant): its other positions are the loop's indices, all of them, in order; the fixed
    ones name none of ``varying`` (the loop's indices and the names its body assigns).
    None for any other subscript."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if len(elts) <= len(loop_vars):
        return None
    names = [e.id if isinstance(e, ast.Name) and e.id in loop_vars else None for e in elts]
    if [n for n in names if n is not None] != list(loop_vars):
        return None
    fixed = tuple(k for k, n in enumerate(names) if n is None)
    for k in fixed:
        if any(isinstance(n, ast.Name) and n.id in varying for n in syntax.walk(elts[k])):
            return None
    return fixed


def quotient_positions(sub, loop_vars, value):
    """``{position: c}`` of a subscript that indexes a fragment with the loop's indices in
    order, some of them floor-divided by a compile-time integer ``c`` > 1 (``B[i, j // 2]``
    in a loop over ``(i, j)``: two 4-bit values a byte, TileLang's dequantizing GEMMs);
    else None. ``value(expr)``: the compile-time value of an expression, or raises."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if len(elts) != len(loop_vars):
        return None
    out = {}
    for k, (e, v) in enumerate(zip(elts, loop_vars)):
        if isinstance(e, ast.Name) and e.id == v:
            continue
        if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.FloorDiv)
                and isinstance(e.left, ast.Name) and e.left.id == v):
            return None
        try:
            c = value(e.right)
        except Exception:       # noqa: BLE001 - not a compile-time value
            return None
        if not isinstance(c, int) or isinstance(c, bool) or c < 2:
            return None
        out[k] = c
    return out or None


def is_parallel(loop: ast.For, ctx) -> bool:
    it = loop.iter
    return isinstance(it, ast.Call) and resolve_static(it.func, ctx.namespace) is T.Parallel


def mixed_positions(sub, loop_vars, varying):
    """``(fixed positions, dropped loop positions)`` of a subscript that indexes a
    fragment with some of the loop's indices, in order, and values fixed within the loop
    at its other positions (``b[k, j]`` in a loop over ``(i, j)``, k a serial loop's
    variable: TileLang's DeepSeek mHC); else None."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    names = [e.id if isinstance(e, ast.Name) and e.id in loop_vars else None for e in elts]
    used = [n for n in names if n is not None]
    if not used or len(used) >= len(loop_vars) or len(set(used)) != len(used):
        return None
    it = iter(loop_vars)
    if not all(any(v == x for x in it) for v in used):
        return None
    fixed = tuple(k for k, n in enumerate(names) if n is None)
    if not fixed:
        return None
    for k in fixed:
        if any(isinstance(n, ast.Name) and n.id in varying for n in syntax.walk(elts[k])):
            return None
    dropped = tuple(k for k, v in enumerate(loop_vars) if v not in used)
    if fixed == dropped and len(elts) == len(loop_vars) and all(
            isinstance(elts[k], ast.Constant) and elts[k].value == 0 for k in fixed):
        return None     # F[0, j] in a loop over (u, j): the unit dimension's own index
    return fixed, dropped

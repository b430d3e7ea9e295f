"""Pass: a clear followed by a gemm into the same tile becomes a gemm that clears.

    T.clear(acc_s)                                  T.gemm(Q_s, K_s, acc_s, clear_accum=True)
    T.gemm(Q_s, K_s, acc_s, transpose_B=True)  ──▶  (the plan's ``clear_accum``)

The two programs compute the same thing: C = op(A) · op(B). What changes is the code:
on wgmma the first k step runs with ``scale-d = 0``, so the accumulator registers are not
zeroed by 64 moves per thread before the gemm and their old values are not read
(``codegen/lowering/wgmma.py``); a register the asynchronous gemm will write is not
defined by another instruction inside its window, which is what lets ptxas keep the
wgmma asynchronous. On mma.sync, MFMA and the FMA path the gemm writes the zeros itself,
as the clear did.

The clear is folded only where nothing can see the difference: ``T.clear(C)`` or
``T.fill(C, 0)`` of the whole tile C, the very next statement of the same block the gemm
``__tj_gemm(A, B, C, gid)`` (after ``tile_allocation``; the ``pass`` a folded compile-time
``if`` leaves does not count), with C not also A or B.
"""
from __future__ import annotations

import ast
import dataclasses

from tilejit import language as T
from tilejit.frontend.source import resolve_static, statement_lists
from tilejit.ir.markers import GEMM, TILE


def fold_clears_into_gemms(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    for stmts in statement_lists(fdef):
        if len(stmts) > 1:
            stmts[:] = _fold(stmts, ctx)
    return fdef


def _fold(stmts, ctx):
    out = []
    for stmt in [s for s in stmts if not isinstance(s, ast.Pass)] or stmts[:1]:
        gid = _gemm_id(stmt)
        if out and gid is not None:
            cleared = _cleared_tile(out[-1], ctx)
            plan, a, b, c, line = ctx.plan.gemms[gid]
            # (five operands: a sparse gemm's metadata, or a folded refill, left alone)
            folds = len(stmt.value.args) == 4 or plan.sparse
            if cleared == c and c not in (a, b) and not plan.clear_accum and folds:
                ctx.plan.gemms[gid] = (dataclasses.replace(plan, clear_accum=True),
                                       a, b, c, line)
                out.pop()
        out.append(stmt)
    return out


def _gemm_id(stmt):
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == GEMM
            and len(call.args) in (4, 5) and isinstance(call.args[3], ast.Constant)):
        return call.args[3].value
    return None


def _cleared_tile(stmt, ctx):
    """The name of the whole tile ``T.clear(X)`` / ``T.fill(X, 0)`` sets to zero, or None."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not isinstance(call, ast.Call) or call.keywords:
        return None
    op = resolve_static(call.func, ctx.namespace)
    if op is T.clear and len(call.args) == 1:
        target = call.args[0]
    elif (op is T.fill and len(call.args) == 2 and isinstance(call.args[1], ast.Constant)
          and type(call.args[1].value) in (int, float) and call.args[1].value == 0):
        target = call.args[0]
    else:
        return None
    if isinstance(target, ast.Name):
        name = target.id
    elif (isinstance(target, ast.Call) and isinstance(target.func, ast.Name)
          and target.func.id == TILE and target.args
          and isinstance(target.args[0], ast.Constant)):
        name = target.args[0].value
    else:
        return None
    return name if name in ctx.plan.tiles else None

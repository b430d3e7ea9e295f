"""A helper's early ``return``s made one exit, so that the front end can inline it.

TileLang expands a macro in place, and an early ``return`` under an ``if`` is fine
there (DeepSeek's TileKernels: ``if out_config.use_ue8m0: ... return sf, sf_inv``,
then the other format's code and its ``return``). The inliner (``kernel_macros.py``)
replaces a call by the helper's body, whose value is its last statement's. Here the
statements after an ``if`` whose branch returns move into the branch that does not
(``if c: A; return x`` / ``B; return y`` becomes ``if c: A; return x`` / ``else: B;
return y``), until every path ends in a ``return``; each is then an assignment to one
result name and the body ends by returning that name. A ``return`` inside a loop or a
``with`` has no such form: ``None`` (the caller's error names the rule)."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax


def single_exit(body: list, result: str | None) -> list | None:
    """``body`` (a helper's statements with a ``return`` before its end) with every
    path ending in ``result = value`` and a last ``return result`` (``result`` None: a
    call whose value is not used, each ``return`` dropped); None when a ``return`` sits
    where no such form exists."""
    tail = _tail_form(list(body))
    if tail is None or (result is not None and not always_returns(tail)):
        return None                 # (a call whose value is unused may fall off the end)
    out = _assign_returns(tail, result)
    if result is None:
        return out
    last = ast.Return(ast.Name(result, ast.Load()))
    return out + [ast.copy_location(last, body[-1])]


def _has_return(node) -> bool:
    return any(isinstance(n, ast.Return) for n in syntax.walk(node))


def _tail_form(stmts: list) -> list | None:
    """The statements with each ``if`` that holds a ``return`` taking the statements
    after it into its branches that fall through; None for a ``return`` in a loop,
    ``with`` or ``try``."""
    out = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            return out + [stmt]             # what follows never runs
        if not _has_return(stmt):
            out.append(stmt)
            continue
        if not isinstance(stmt, ast.If):
            return None
        rest = stmts[i + 1:]
        branches = []
        for branch in (stmt.body, stmt.orelse):
            if always_returns(branch):
                branch = _tail_form(branch)
            else:
                branch = _tail_form(branch + copy.deepcopy(rest))
            if branch is None:
                return None
            branches.append(branch)
        new = ast.copy_location(ast.If(stmt.test, branches[0] or [ast.Pass()],
                                       branches[1]), stmt)
        return out + [new]
    return out


def always_returns(stmts: list) -> bool:
    """Whether every path through ``stmts`` ends in a ``return``."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and always_returns(last.body) and \
        always_returns(last.orelse)


def _assign_returns(stmts: list, result: str) -> list:
    out = []
    for stmt in stmts:
        if isinstance(stmt, ast.Return) and result is None:
            out.append(ast.copy_location(ast.Pass(), stmt))
        elif isinstance(stmt, ast.Return):
            value = stmt.value if stmt.value is not None else ast.Constant(None)
            out.append(ast.copy_location(
                ast.Assign([ast.Name(result, ast.Store())], value), stmt))
        elif isinstance(stmt, ast.If) and _has_return(stmt):
            out.append(ast.copy_location(ast.If(
                stmt.test, _assign_returns(stmt.body, result),
                _assign_returns(stmt.orelse, result)), stmt))
        else:
            out.append(stmt)
    return out

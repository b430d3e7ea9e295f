"""``T.assume(cond)`` at the top of the kernel's block whose condition depends only on
values the host has (scalar and constexpr parameters, names the statements before the
launch assign, such as ``N = A.shape[0]``): also checked on the host before each launch,
as TileLang does, so arguments that break it raise an ``AssumptionError`` (an
AssertionError and a RuntimeError) before anything runs instead of undefined behaviour
on the GPU. The device keeps its ``T.assume`` (``llvm.assume``; checked by the
simulator).

The check is an ``assert`` put before the launch, its message starting with
``ASSUME``; the host program (``rewrite.host_tree``) raises an ``AssumptionError`` for
it, the device program drops it as it drops every host ``assert``.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

ASSUME = "Assume: "
_PURE = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp,
         ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context)


def hoist_host_assumptions(ks) -> None:
    """Each host-evaluable top-level ``T.assume`` of the block, asserted before the launch
    too (``ks.tree`` and ``ks.launch_index`` updated in place)."""
    launch = ks.tree.body[ks.launch_index]
    known = set(ks.params)
    for stmt in ks.tree.body[:ks.launch_index]:
        known |= {n.id for n in syntax.walk(stmt) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
    checks = []
    for stmt in launch.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and resolve_static(stmt.value.func, ks.namespace) is T.assume
                and len(stmt.value.args) == 1 and not stmt.value.keywords):
            continue
        cond = stmt.value.args[0]
        nodes = list(syntax.walk(cond))
        if all(isinstance(n, _PURE) for n in nodes) and all(
                n.id in known for n in nodes if isinstance(n, ast.Name)):
            msg = ast.Constant(f"{ASSUME}{ast.unparse(cond)} does not hold for these "
                               f"arguments (T.assume at line {stmt.lineno})")
            checks.append(ast.copy_location(ast.Assert(copy.deepcopy(cond), msg), stmt))
    ks.tree.body[ks.launch_index:ks.launch_index] = checks
    ks.launch_index += len(checks)


class RaiseAssumptions(syntax.NodeTransformer):
    """In the host program: ``assert cond, "Assume: ..."`` → ``if not cond: raise
    <error>(...)`` with the ``AssumptionError`` bound to ``error_name``."""

    def __init__(self, error_name):
        self.error_name = error_name

    def visit_Assert(self, node):
        msg = node.msg
        if not (isinstance(msg, ast.Constant) and isinstance(msg.value, str)
                and msg.value.startswith(ASSUME)):
            return node
        raise_ = ast.Raise(ast.Call(ast.Name(self.error_name, ast.Load()), [msg], []), None)
        test = ast.UnaryOp(ast.Not(), node.test)
        return ast.copy_location(ast.If(test, [raise_], []), node)

"""TVM's script branches, as TileOPs' kernels write them, become Python's ``if``:

    with T.If(t < n - 1):                      if t < n - 1:
        with T.Then():                     →       ...
            ...                                else:
        with T.Else():                             ...
            ...

also ``with T.If(c), T.Then(): ...`` (no else). Any other arrangement of them is a
CompileError at its line."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static


def rewrite_tir_branches(ks: KernelSource) -> None:
    ks.tree = syntax.fix_missing_locations(_Branches(ks).visit(ks.tree))


class _Branches(syntax.NodeTransformer):
    def __init__(self, ks):
        self.ks = ks

    def _is(self, expr, fn) -> bool:
        return isinstance(expr, ast.Call) and \
            resolve_static(expr.func, self.ks.namespace) is fn

    def _part(self, stmt, fn):
        """The body of ``with T.Then():`` / ``with T.Else():``, or None."""
        if isinstance(stmt, ast.With) and len(stmt.items) == 1 and \
                self._is(stmt.items[0].context_expr, fn) and \
                not stmt.items[0].context_expr.args:
            return stmt.body
        return None

    def visit_With(self, node):
        first = node.items[0].context_expr
        if not self._is(first, T.If):
            if all(self._is(i.context_expr, T.Then) or self._is(i.context_expr, T.Else)
                   for i in node.items):
                raise self.ks.error("T.Then() / T.Else() belong inside `with T.If(cond):`",
                                    node)
            return self.generic_visit(node)     # (another block: the validation's to name)
        return self.generic_visit(self._branch(node, first))

    def _branch(self, node, first):
        if len(first.args) != 1 or first.keywords or any(
                i.optional_vars is not None for i in node.items):
            raise self.ks.error("T.If(cond) takes one condition: `with T.If(cond):`", node)
        cond = first.args[0]
        if len(node.items) == 2 and self._is(node.items[1].context_expr, T.Then):
            return ast.copy_location(ast.If(cond, node.body, []), node)
        then = self._part(node.body[0], T.Then) if len(node.items) == 1 else None
        orelse = self._part(node.body[1], T.Else) if len(node.body) == 2 else []
        if then is None or orelse is None or len(node.body) > 2:
            raise self.ks.error("`with T.If(cond):` holds `with T.Then():` and, after it, "
                                "`with T.Else():` (nothing else)", node)
        return ast.copy_location(ast.If(cond, then, orelse), node)

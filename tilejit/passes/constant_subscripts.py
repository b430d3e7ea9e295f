"""Part of tile allocation: an element of a Python container the kernel reads from its
module or closure, at an index known at compile time, is that element.

TileLang builds its kernel by running Python, so a kernel may pick a helper or a setting
from a dict (``FP8_OPS[op](a, b, dtype)`` in TileLang's own tests, ``op`` a factory
argument). The compiler does the same before typing: ``X[k]``, with ``X`` a dict, list
or tuple the kernel does not assign and ``k`` a compile-time value, becomes a new global
bound to ``X[k]`` (a helper function made a macro, ``frontend/helpers.py``). The
simulator runs the subscript as it is written."""
from __future__ import annotations

import ast

from tilejit.frontend.helpers import as_macro, is_helper
from tilejit.passes.static_eval import NotStatic

PREFIX = "__tj_const"


class _Fold(ast.NodeTransformer):
    def __init__(self, ctx, static, assigned):
        self.ctx, self.static, self.assigned = ctx, static, assigned

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if not (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id not in self.assigned):
            return node
        container = self.ctx.namespace.get(node.value.id)
        if not isinstance(container, (dict, list, tuple)):
            return node
        try:
            key = self.static.value(node.slice)
            value = container[key]
        except (NotStatic, LookupError, TypeError):
            return node             # typing reports what it cannot take
        name = f"{PREFIX}{self.ctx.number('const')}"
        self.ctx.namespace[name] = as_macro(value) if is_helper(value) else value
        return ast.copy_location(ast.Name(name, ast.Load()), node)


def fold_constant_subscripts(fdef: ast.FunctionDef, ctx, static) -> ast.FunctionDef:
    # names the kernel binds itself (its parameters, assignments, loop targets) shadow
    # the module's
    assigned = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    assigned |= {a.arg for a in ast.walk(fdef.args) if isinstance(a, ast.arg)}
    return _Fold(ctx, static, assigned).visit(fdef)

"""Part of tile allocation: an element of a Python container the kernel reads from its
module or closure, at an index known at compile time, is that element.

TileLang builds its kernel by running Python, so a kernel may pick a helper or a setting
from a dict (``FP8_OPS[op](a, b, dtype)`` in TileLang's own tests, ``op`` a factory
argument). The compiler does the same before typing: ``X[k]``, with ``X`` a dict, list
or tuple the kernel does not assign and ``k`` a compile-time value, becomes a new global
bound to ``X[k]`` (a helper function made a macro, ``frontend/helpers.py``); so does a
helper called with compile-time arguments to make the function the kernel then calls
(``factory("int", 8)(x)``). The simulator runs the subscript and the call as written."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.helpers import as_macro, is_helper
from tilejit.passes.static_eval import NotStatic

PREFIX = "__tj_const"


class _Fold(syntax.NodeTransformer):
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


    def visit_Call(self, node):
        """``factory(args)(…)``: a helper of the program called with compile-time
        arguments to make the function the kernel calls (TileLang's dequantizing GEMV,
        ``_tir_packed_int_to_int_convert("int", 8)(nbit, val, pos, dtype)``): run now,
        as TileLang runs it while building the kernel, and its result (a helper) bound
        to a new global."""
        node = self.generic_visit(node)
        inner = node.func
        if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name)
                and inner.func.id not in self.assigned):
            return node
        factory = self.ctx.namespace.get(inner.func.id)
        if isinstance(factory, T.macro):        # a helper the front end made a macro
            factory = factory.func
        if not is_helper(factory) and not callable(getattr(factory, "__code__", None)):
            return node
        if not is_helper(factory):
            return node
        try:
            args = [self.static.value(a) for a in inner.args]
            kwargs = {k.arg: self.static.value(k.value) for k in inner.keywords
                      if k.arg is not None}
        except NotStatic:
            return node
        if len(kwargs) != len(inner.keywords):
            return node
        try:
            made = factory(*args, **kwargs)
        except Exception as e:      # noqa: BLE001 - the factory's own error, at the call
            raise self.ctx.error(f"{inner.func.id}(...), run to make the function the kernel "
                                 f"calls, raised {type(e).__name__}: {e}", inner) from None
        if not is_helper(made):
            return node
        name = f"{PREFIX}{self.ctx.number('const')}"
        self.ctx.namespace[name] = as_macro(made)
        node.func = ast.copy_location(ast.Name(name, ast.Load()), inner)
        return node


def fold_constant_subscripts(fdef: ast.FunctionDef, ctx, static) -> ast.FunctionDef:
    # names the kernel binds itself (its parameters, assignments, loop targets) shadow
    # the module's
    assigned = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    assigned |= {a.arg for a in syntax.walk(fdef.args) if isinstance(a, ast.arg)}
    return _Fold(ctx, static, assigned).visit(fdef)

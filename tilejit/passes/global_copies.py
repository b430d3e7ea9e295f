"""Pass: ``T.copy`` between two whole global tensors (a tensor parameter, or a view of one:
``T.reshape`` / ``T.view``), as TileLang programs write ``T.copy(A_reshaped, B)``.

Neither operand is a tile, so neither gives the copy a thread layout; the copy becomes
the element loop it means, over the tensors' compile-time shapes (a tensor named bare
in ``T.copy`` has its shape specialized; a view's is its ``shape`` argument):

    T.copy(X, Y)   →   for i0, i1 in T.Parallel(e0, e1):  Y[i0, i1] = X[i0, i1]

Between dtypes the element is converted (``T.cast``, float to int included, as a tile
copy converts). The two shapes must hold the same extents once dimensions of extent 1 are set aside
(those are indexed at 0). A shape that is not known at compile time leaves the copy as
written (the copy planner then says what it needs).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import CAST
from tilejit.passes.element_loops import copy_operands, index, parallel_loop
from tilejit.passes.static_eval import NotStatic, StaticEval


class _Copies(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
        self.shapes = {}        # global tensor name -> static shape (None: not static)
        for name, ty in ctx.params.items():
            dims = [ctx.namespace.get(shape_constant_name(name, d)) for d in range(ty.ndim)]
            self.shapes[name] = tuple(dims) if all(isinstance(d, int) for d in dims) else None
        for node in syntax.walk(fdef):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
                self._view(node.targets[0].id, node.value)

    def _view(self, name, call):
        if resolve_static(call.func, self.ctx.namespace) not in (T.reshape, T.view):
            return
        args = {k.arg: k.value for k in call.keywords}
        base = call.args[0] if call.args else args.get("buffer")
        shape = call.args[1] if len(call.args) > 1 else args.get("shape")
        if not (isinstance(base, ast.Name) and base.id in self.shapes) or shape is None:
            return
        try:
            value = self.static.value(shape)
            value = tuple(int(v) for v in (value if isinstance(value, tuple) else (value,)))
        except (NotStatic, TypeError, ValueError):
            value = None
        self.shapes[name] = value

    def visit_Expr(self, node):
        operands = copy_operands(node, self.ctx.namespace)
        if operands is None:
            return node
        src, dst = operands
        if not all(isinstance(x, ast.Name) and self.shapes.get(x.id) for x in (src, dst)):
            return node
        s_shape, d_shape = self.shapes[src.id], self.shapes[dst.id]
        extents = [e for e in d_shape if e != 1]
        if [e for e in s_shape if e != 1] != extents:
            raise self.ctx.error(f"T.copy({src.id}, {dst.id}): the tensors' shapes {s_shape} "
                                 f"and {d_shape} differ", node)
        seq = self.ctx.number("global_copy")
        names = [f"__tj_gc{seq}_{d}" for d in range(max(len(extents), 1))]

        def element(name, shape, ctx):
            it = iter(names)
            return ast.Subscript(ast.Name(name, ast.Load()), index(
                [ast.Name(next(it), ast.Load()) if e != 1 else ast.Constant(0)
                 for e in shape]), ctx)

        value = element(src.id, s_shape, ast.Load())
        s_dtype, d_dtype = (self.ctx.param_dtypes.get(x.id) for x in (src, dst))
        if s_dtype is not None and d_dtype is not None and s_dtype != d_dtype:
            # a copy between dtypes converts (as a tile copy does), float to int too
            value = ast.Call(ast.Name(CAST, ast.Load()), [value, ast.Constant(d_dtype.name)],
                             [])
        store = ast.Assign([element(dst.id, d_shape, ast.Store())], value)
        return ast.copy_location(parallel_loop(names, extents or [1], [store]), node)


def expand_global_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    return syntax.fix_missing_locations(_Copies(ctx, fdef).visit(fdef))

"""Pass: ``T.use_swizzle(panel_size, order="row", enable=True)``, block rasterization.

The statement becomes a remapping of the block indices where they are bound (every use
of them sees it, as TileLang's, also one above the statement): blocks launched one
after another (linear id ``by * gx + bx``) walk a panel of ``panel_size`` block rows
column by column before moving on, instead of a whole row of the grid, so the A rows
and B columns they read stay in L2 (``order="col"`` swaps the roles of x and y). The
map is a bijection of the grid, so results never change; the simulator ignores it.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import BLOCK_INDEX, SWIZZLE_BLOCKS
from tilejit.passes.static_eval import NotStatic, StaticEval


def _block_names(fdef):
    names = {}
    for stmt in fdef.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == BLOCK_INDEX
                and isinstance(stmt.value.args[0], ast.Constant)):
            names[stmt.value.args[0].value] = stmt.targets[0].id
    return names


class _Rasterize(syntax.NodeTransformer):
    def __init__(self, ctx, static, names):
        self.ctx, self.static, self.names = ctx, static, names

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.use_swizzle):
            return node
        opts = dict(zip(("panel_size", "order", "enable"), call.args))
        opts.update({k.arg: k.value for k in call.keywords})
        try:
            values = {k: self.static.value(v) for k, v in opts.items()}
        except NotStatic:
            raise self.ctx.error("T.use_swizzle's arguments must be known at compile time",
                                 node) from None
        panel = int(values.get("panel_size", 10))
        order = values.get("order", "row")
        order = "col" if order == "column" else order      # TileLang's spelling
        if order not in ("row", "col"):
            raise self.ctx.error(f"T.use_swizzle: order must be 'row' or 'column' ('col'), "
                                 f"got {order!r}", node)
        if panel < 1 and values.get("enable", True):
            raise self.ctx.error(f"T.use_swizzle: panel_size must be positive, got {panel}", node)
        if not values.get("enable", True) or 0 not in self.names or 1 not in self.names:
            return ast.copy_location(ast.Pass(), node)
        target = ast.Tuple([ast.Name(self.names[0], ast.Store()),
                            ast.Name(self.names[1], ast.Store())], ast.Store())
        value = ast.Call(ast.Name(SWIZZLE_BLOCKS, ast.Load()),
                         [ast.Constant(panel), ast.Constant(order == "row")], [])
        if self.remap is not None:
            raise self.ctx.error("T.use_swizzle: one per kernel (the block order is the "
                                 "kernel's)", node)
        self.remap = ast.copy_location(ast.Assign([target], value), node)
        return ast.copy_location(ast.Pass(), node)


def rasterize_blocks(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    """The remap takes the place of the block indices where they are bound, at the top
    of the block, as TileLang's rasterization does: every use of them (also one above the
    ``T.use_swizzle`` line, ``row0 = by * bm``) sees the remapped blocks."""
    names = _block_names(fdef)
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    rasterize = _Rasterize(ctx, static, names)
    rasterize.remap = None
    fdef = rasterize.visit(fdef)
    if rasterize.remap is not None:
        last = max(i for i, stmt in enumerate(fdef.body) if isinstance(stmt, ast.Assign)
                   and isinstance(stmt.targets[0], ast.Name)
                   and stmt.targets[0].id in names.values())
        fdef.body.insert(last + 1, rasterize.remap)
    return fdef

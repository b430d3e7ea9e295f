"""Pass: ``T.transpose(src, dst)`` of two whole 2-d tiles becomes the element loop it
means, ``for i, j in T.Parallel(M, N): dst[j, i] = src[i, j]``. Shared tiles are read
and written element by element (the barrier pass orders them); a fragment on either
side is then a fragment indexed transposed in a T.Parallel, which
``fragment_transposes.py`` (the next passes) takes through shared memory."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.plan import FRAGMENT, SHARED
from tilejit.passes.element_loops import parallel_loop


class _Transposes(syntax.NodeTransformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.count = 0

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.transpose):
            return node
        args = list(call.args) + [k.value for k in call.keywords if k.arg in ("src", "dst")]
        if len(args) < 2 or not all(isinstance(a, ast.Name) and a.id in self.ctx.plan.tiles
                                    and self.ctx.plan.tiles[a.id].kind in (SHARED, FRAGMENT)
                                    for a in args[:2]):
            raise self.ctx.error("T.transpose(src, dst): two whole 2-d tiles (shared or "
                                 "fragment) named by their variables", node)
        src, dst = (self.ctx.plan.tiles[a.id] for a in args[:2])
        if len(src.shape) != 2 or tuple(dst.shape) != tuple(src.shape)[::-1]:
            raise self.ctx.error(f"T.transpose: src {src.name!r} {src.shape} and dst "
                                 f"{dst.name!r} {dst.shape}: 2-d tiles, dst's shape src's "
                                 f"reversed", node)
        i, j = f"__tj_tp{self.count}_i", f"__tj_tp{self.count}_j"
        self.count += 1
        load = ast.Subscript(ast.Name(src.name, ast.Load()),
                             ast.Tuple([ast.Name(i, ast.Load()), ast.Name(j, ast.Load())],
                                       ast.Load()), ast.Load())
        store = ast.Subscript(ast.Name(dst.name, ast.Load()),
                              ast.Tuple([ast.Name(j, ast.Load()), ast.Name(i, ast.Load())],
                                        ast.Load()), ast.Store())
        loop = parallel_loop([i, j], list(src.shape), [ast.Assign([store], load)])
        return syntax.fix_missing_locations(ast.copy_location(loop, node))


def expand_transposes(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ctx.namespace)
               is T.transpose for n in syntax.walk(fdef)):
        return fdef
    return _Transposes(ctx).visit(fdef)

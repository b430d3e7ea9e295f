"""Pass: ``T.copy`` between a region of a fragment and a whole shared tile, as TileLang's
decode kernels write ``T.copy(acc_o[:valid_block_H, :], O_shared)``.

A fragment's elements are spread over the block's threads by its layout, so a copy of
part of it is the loop over the whole fragment with the part selected:

    T.copy(F[r0:r1, c0:c1], S)  →  for i, j in T.Parallel(*F.shape):
                                       if r0 <= i < r1 and c0 <= j < c1:
                                           S[i - r0, j - c0] = F[i, j]

(and ``T.copy(S, F[r0:r1, c0:c1])`` the other way), which the layout pass maps onto the
fragment's layout as any loop over it. A pinned dimension (``F[k, :]``) is one value of
its index. The bounds must be known at compile time and the shared tile's shape must be
the region's (dimensions of extent 1 set aside); anything else keeps the copy as written
(the copy planner then says it needs the whole fragment).
"""
from __future__ import annotations

import ast

from tilejit.ir.markers import REGION
from tilejit.ir.plan import FRAGMENT, SHARED
from tilejit.passes.element_loops import copy_operands, index, parallel_loop
from tilejit.passes.static_eval import NotStatic, StaticEval


def _region(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == REGION and isinstance(node.args[0], ast.Name))


class _Copies(ast.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def _tile(self, node, kind):
        tile = self.ctx.plan.tiles.get(node.id) if isinstance(node, ast.Name) else None
        return tile if tile is not None and tile.kind == kind else None

    def _bounds(self, region, shape):
        """[(start, stop) per dimension of the fragment] of a region, or None."""
        kinds = region.args[1].value
        try:
            starts = self.static.value(region.args[2])
            ends = self.static.value(region.args[3])
        except NotStatic:
            return None
        bounds = []
        for d, (kind, n) in enumerate(zip(kinds, shape)):
            start = 0 if starts[d] is None else int(starts[d])
            stop = (start + 1 if kind == "p" else n if ends[d] is None else int(ends[d]))
            if not 0 <= start < stop <= n:
                return None
            bounds.append((start, stop))
        return bounds

    def visit_Expr(self, node):
        operands = copy_operands(node, self.ctx.namespace)
        if operands is None:
            return node
        src, dst = operands
        if _region(src) and self._tile(src.args[0], FRAGMENT) and self._tile(dst, SHARED):
            region, tile, to_fragment = src, self._tile(dst, SHARED), False
        elif _region(dst) and self._tile(dst.args[0], FRAGMENT) and self._tile(src, SHARED):
            region, tile, to_fragment = dst, self._tile(src, SHARED), True
        else:
            return node
        fragment = self.ctx.plan.tiles[region.args[0].id]
        shape = tuple(int(e) for e in fragment.shape)
        bounds = self._bounds(region, shape)
        if bounds is None or [b - a for a, b in bounds if b - a != 1] != [
                int(e) for e in tile.shape if int(e) != 1]:
            return node
        seq = self.ctx.number("fragment_region")
        names = [f"__tj_fr{seq}_{d}" for d in range(len(shape))]
        tests = [ast.Compare(ast.Constant(a), [ast.LtE(), ast.Lt()],
                             [ast.Name(n, ast.Load()), ast.Constant(b)])
                 for n, (a, b), e in zip(names, bounds, shape) if (a, b) != (0, e)]
        inner = [ast.BinOp(ast.Name(n, ast.Load()), ast.Sub(), ast.Constant(a))
                 for n, (a, b) in zip(names, bounds) if b - a != 1]
        pad = iter(inner)
        tile_index = [next(pad) if int(e) != 1 else ast.Constant(0) for e in tile.shape]
        f_elem = ast.Subscript(ast.Name(fragment.name, ast.Load()), index(
            [ast.Name(n, ast.Load()) for n in names]), ast.Load())
        t_elem = ast.Subscript(ast.Name(tile.name, ast.Load()), index(tile_index),
                               ast.Load())
        if to_fragment:
            f_elem.ctx = ast.Store()
            store = ast.Assign([f_elem], t_elem)
        else:
            t_elem.ctx = ast.Store()
            store = ast.Assign([t_elem], f_elem)
        body = [ast.If(ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0],
                       [store], [])] if tests else [store]
        return ast.copy_location(parallel_loop(names, list(shape), body), node)


def expand_fragment_region_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    return ast.fix_missing_locations(_Copies(ctx, fdef).visit(fdef))

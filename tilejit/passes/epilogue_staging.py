"""Pass: a wgmma accumulator copied to global memory goes through shared memory and TMA.

``T.copy(C_f, C[i, j])`` from the accumulator of a gemm on wgmma stores each thread's
registers: pairs of elements, 4 bytes per store, half of every 32-byte sector (ncu, H200:
11 % of the consumer warps' time in a 128×256 GEMM, the load/store unit throttled). On
sm_90a, when the tile fits in shared memory, this pass rewrites the copy the way
TileLang's Hopper examples write their epilogue:

    S = tile("__tj_epilogue<k>")        # the swizzled layout, the output's dtype
    T.copy(C_f, S)                      # 4-byte shared stores, no bank conflicts
    T.copy(S, C[i, j])                  # then a TMA store (tma_store.py): one thread

so the consumers hand the tile to TMA and go on (to the next tile of a persistent
kernel) while it drains. A copy qualifies when the region is one TMA can store (the
tile's shape, a tensor parameter that is 16-byte aligned with a contiguous last
dimension and a dtype TMA moves: ``tma.box_plan``), nothing else in the kernel touches
that tensor (``tma_store.other_uses``), the kernel has no ``return``, and the placement
of every shared tile with the new one (``shared_memory.place``) fits the target. A
non-persistent kernel's staging tile takes the bytes of the pipeline's stages, dead
after the loop; a persistent kernel needs its own. Everything else keeps the direct
store. ``CompileOptions.tma`` (``TILEJIT_TMA=0``) turns it off with TMA.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.ir.markers import TILE
from tilejit.ir.plan import FRAGMENT, SHARED, Tile
from tilejit.layouts import make_swizzled_layout
from tilejit.passes.shared_memory import place
from tilejit.passes.tma import box_plan
from tilejit.passes.tma_store import copy_to_tensor, other_uses


def _sites(fdef, ctx, accumulators):
    """(statement list, statement, fragment, region) of each ``T.copy(accumulator,
    region)`` statement."""
    found = []
    for node in syntax.walk(fdef):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            for st in stmts if isinstance(stmts, list) else ():
                copy_site = copy_to_tensor(st.value, ctx) if isinstance(st, ast.Expr) else None
                if copy_site is not None and copy_site[0] in accumulators:
                    found.append((stmts, st, *copy_site))
    return found


def _index(stmts, stmt) -> int:
    return next(i for i, s in enumerate(stmts) if s is stmt)


def stage_epilogues(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not (ctx.target.has_wgmma and ctx.options.tma):
        return fdef
    plan = ctx.plan
    accumulators = {c for gp, _a, _b, c, _line in plan.gemms.values()
                    if gp.engine == "wgmma" and plan.tiles[c].kind == FRAGMENT}
    if not accumulators or any(isinstance(n, ast.Return) for n in syntax.walk(fdef)):
        return fdef
    limit = ctx.target.shared_limit
    for k, (stmts, stmt, frag, region) in enumerate(_sites(fdef, ctx, accumulators)):
        f = plan.tiles[frag]
        ty = ctx.params.get(region.args[0].id)
        if ty is None or len(f.shape) != 2:
            continue
        name = f"__tj_epilogue{k}"
        tile = Tile(name, SHARED, f.shape, ty.dtype, stmt.lineno,
                    layout=make_swizzled_layout(tuple(f.shape), ty.dtype.itemsize),
                    layout_reason=f"stages the accumulator {frag!r} for a TMA store (the "
                                  f"T.copy at line {stmt.lineno})")
        found = box_plan(ctx, region, tile, {})
        if found is None or other_uses(fdef, found[0], [(None, None, region)]):
            continue
        tile.align = max(tile.align, found[2][3])
        call = stmt.value
        first = ast.Expr(ast.Call(copy.deepcopy(call.func),
                                  [call.args[0], ast.Name(name, ast.Load())], []))
        second = ast.Expr(ast.Call(copy.deepcopy(call.func),
                                   [ast.Name(name, ast.Load()), call.args[1]], []))
        alloc = ast.Assign([ast.Name(name, ast.Store())],
                           ast.Call(ast.Name(TILE, ast.Load()), [ast.Constant(name)], []))
        i = _index(stmts, stmt)
        stmts[i:i + 1] = [ast.copy_location(x, stmt) for x in (first, second)]
        fdef.body.insert(0, ast.copy_location(alloc, fdef.body[0]))
        plan.tiles[name] = tile
        if limit is not None and place(fdef, plan)[1] > limit:
            del plan.tiles[name]                # does not fit: the direct store stays
            del fdef.body[0]
            i = _index(stmts, first)
            stmts[i:i + 2] = [stmt]
    return syntax.fix_missing_locations(fdef)

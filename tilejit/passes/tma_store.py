"""Pass: a whole shared tile copied to a global tensor is stored by TMA (sm_90+).

``T.copy(C_s, C[i, j])`` from threads is every thread loading 16-byte chunks of the
tile and storing them to global memory; a GEMM's epilogue written the way TileLang's
Hopper examples write it (``T.copy(C_f, C_s); T.copy(C_s, C[...])``) then spends its
consumer warps on stores. TMA does the second copy from one thread, asynchronously
(``cp.async.bulk.tensor ... .global.shared::cta.bulk_group``, PTX ISA 8.0), clipping the
box at the tensor's edges, so the warps go on to the next tile while it drains:

    <writes of C_s>                       # T.copy(C_f, C_s): generic-proxy stores
    fence.proxy.async.shared::cta         # every writer (barriers.py puts these two)
    sync()
    tma_store(C_s → C[i, j])              # thread 0: one box per column of swizzle atoms,
                                          # then commit_group
    ...
    tma_store_wait()                      # thread 0: wait_group.read 0 (TMA has read C_s)
    sync()                                # the first barrier after the store: C_s may be
                                          # written again after it
    (kernel end)  tma_store_wait()

The barrier pass gives every TMA store the fence and barrier before it and counts the
store as a read of the tile (``plan.tma_stored``) until the next barrier, which it
precedes with the wait. The layout pass
gives a tile that is only written from fragments and stored to global memory the
swizzled layout (conflict-free stores from the accumulator layouts, and a layout TMA
reads: ``layout_inference._store_staging_tiles``).

A copy qualifies as a TMA load's does (``tma.box_plan``: a 16-byte aligned tensor
parameter with a contiguous last dimension, the copy's two ranged dimensions the tile's,
the tile in a layout TMA reads), when the tile is whole (not a pipeline's stage), the
kernel has no ``return`` (the final wait must run) and nothing else in the kernel reads or
writes that tensor (its element accesses would need the stores complete and a global
proxy fence). ``CompileOptions.tma`` (``TILEJIT_TMA=0``) turns this off with the loads.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import REGION, TMA_STORE, TMA_STORE_WAIT
from tilejit.ir.plan import SHARED
from tilejit.passes.tma import MAP_PREFIX, TmaCopy, box_plan


def copy_to_tensor(node, ctx):
    """(the source tile's name, the region call) when ``node`` is ``T.copy(tile, region of a
    tensor parameter)``, else None (``tma_store.py``, ``epilogue_staging.py`` and the layout
    pass's staging tiles look for these copies)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 2
            and resolve_static(node.func, ctx.namespace) is T.copy):
        return None
    src, dst = node.args
    if (isinstance(src, ast.Name) and src.id in ctx.plan.tiles
            and isinstance(dst, ast.Call) and isinstance(dst.func, ast.Name)
            and dst.func.id == REGION and isinstance(dst.args[0], ast.Name)
            and dst.args[0].id in ctx.params):
        return src.id, dst
    return None


def _store_sites(fdef, ctx):
    """(statement, tile name, region call) of each ``T.copy(shared tile, tensor region)``."""
    sites = []
    for node in syntax.walk(fdef):
        found = copy_to_tensor(node.value, ctx) if isinstance(node, ast.Expr) else None
        if found is None:
            continue
        tile = ctx.plan.tiles[found[0]]
        if tile.kind == SHARED and tile.stages <= 1:
            sites.append((node, *found))
    return sites


def other_uses(fdef, tensor, sites) -> bool:
    """Whether ``tensor`` is used other than by the stores in ``sites`` and through its
    attributes (``C.shape``)."""
    allowed = {id(site[2].args[0]) for site in sites}
    allowed |= {id(n.value) for n in syntax.walk(fdef)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return any(isinstance(n, ast.Name) and n.id == tensor and id(n) not in allowed
               for n in syntax.walk(fdef))


def use_tma_stores(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not (ctx.target.has_tma and ctx.options.tma) or ctx.plan.grid_sync:
        # T.sync_grid: a TMA store still in flight at the barrier would not be seen by
        # the blocks that read its bytes after it (passes/grid_sync.py)
        return fdef
    if any(isinstance(n, ast.Return) for n in syntax.walk(fdef)):
        return fdef
    sites = _store_sites(fdef, ctx)
    if not sites:
        return fdef
    plan = ctx.plan
    layouts: dict = {}
    planned = []
    for stmt, tile, region in sites:
        if plan.viewed(tile):
            continue        # its views' generic writes are not ordered by the store's fence
        found = box_plan(ctx, region, plan.tiles[tile], layouts)
        if found is None:
            continue
        tensor = found[0]
        if other_uses(fdef, tensor, [s for s in sites if s[2].args[0].id == tensor]):
            continue
        planned.append((stmt, tile, region, found))
    if not planned:
        return fdef
    names = {(tensor, box): f"{MAP_PREFIX}{tensor}_{i}"
             for i, (tensor, box) in enumerate(plan.tensor_maps)}
    for stmt, tile, region, (tensor, box, (boxes, nbytes, rank, align)) in planned:
        if (tensor, box) not in names:
            names[(tensor, box)] = f"{MAP_PREFIX}{tensor}_{len(plan.tensor_maps)}"
            plan.tensor_maps.append((tensor, box))
            fdef.args.args.append(ast.arg(names[(tensor, box)]))
        cid = f"t{len(plan.tma_copies)}"
        plan.tma_copies[cid] = TmaCopy(plan.tensor_maps.index((tensor, box)), boxes, nbytes,
                                       rank)
        plan.tiles[tile].align = max(plan.tiles[tile].align, align)
        stmt.value = ast.Call(ast.Name(TMA_STORE, ast.Load()),
                              [ast.Name(tile, ast.Load()), region,
                               ast.Name(names[(tensor, box)], ast.Load()), ast.Constant(cid)],
                              [])
        plan.tma_stored.add(tile)
    fdef.body.append(ast.Expr(ast.Call(ast.Name(TMA_STORE_WAIT, ast.Load()), [], [])))
    return syntax.fix_missing_locations(fdef)

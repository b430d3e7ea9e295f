"""Part of choosing gemm engines: mma.sync accumulators whose rows one fragment follows
get the same warps along their rows.

Attention written with a row statistic shared by two gemms (TileLang's sparse-MLA and
MLA-decode kernels: ``m_i`` and ``alpha`` index the rows of both ``acc_s``, 64x64, and
``acc_o``, 64x256) needs the two accumulators to spread their rows alike: a fragment
indexed by the rows of both takes one layout. The planner's Square policy gives a
64x64 tile 2x2 warps and a 64x256 one 1x4, whose rows are spread differently, and
layout inference would stop at "needs two different layouts". Where fragments link
accumulators of one M (a ``T.Parallel`` loop or a call that names both, followed
through the fragments between them) and their mma.sync plans split the rows over a
different number of warps, each is planned again with every warp along its rows
(``FullRow``), when every one of them fits so; wgmma plans (a warpgroup's 64 rows, 16
a warp) already agree and are left alone, as is every gemm without such a link.
"""
from __future__ import annotations

import ast
from dataclasses import replace

from tilejit import syntax
from tilejit.ir.gemm_plan import GemmPlanError, plan_gemm
from tilejit.ir.plan import FRAGMENT


def _links(fdef, fragments) -> dict:
    """Union-find parent map over the fragments a loop or a call names together."""
    parent = {f: f for f in fragments}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(names):
        names = [n for n in names if n in parent]
        for n in names[1:]:
            parent[find(n)] = find(names[0])

    for node in syntax.walk(fdef):
        if isinstance(node, ast.For):
            join(sorted({n.id for s in node.body for n in syntax.walk(s)
                         if isinstance(n, ast.Name)} if _is_parallel(node) else set()))
        elif isinstance(node, ast.Call):
            join([a.id for a in node.args if isinstance(a, ast.Name)])
    return {f: find(f) for f in fragments}


def _is_parallel(loop) -> bool:
    it = loop.iter
    return isinstance(it, ast.Call) and (
        isinstance(it.func, ast.Attribute) and it.func.attr == "Parallel"
        or isinstance(it.func, ast.Name) and it.func.id == "Parallel")


def unify_warp_rows(fdef: ast.FunctionDef, ctx) -> None:
    gemms = ctx.plan.gemms
    mma = {gid: g for gid, g in gemms.items() if g[0].engine == "mma"}
    if len(mma) < 2:
        return
    fragments = [n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT]
    root = _links(fdef, fragments)
    groups: dict = {}
    for gid, (gp, _a, _b, c, _line) in mma.items():
        if c in root:
            groups.setdefault((root[c], gp.M), []).append(gid)
    for gids in groups.values():
        if len({gemms[g][0].warps_m for g in gids}) < 2:
            continue
        try:
            plans = {g: replace(plan_gemm(gp.M, gp.N, gp.K, gp.dtypes, gp.transpose_A,
                                          gp.transpose_B, "FullRow", gp.threads,
                                          gp.clear_accum),
                                a_origin=gp.a_origin, b_origin=gp.b_origin)
                     for g in gids for gp in [gemms[g][0]]}
        except GemmPlanError:
            continue            # not every one fits: the conflict stays, named
        if len({p.warps_m for p in plans.values()}) != 1:
            continue
        for g, p in plans.items():
            gemms[g] = (p, *gemms[g][1:])

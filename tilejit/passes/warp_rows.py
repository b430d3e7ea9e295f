"""Part of choosing gemm engines: mma.sync accumulators whose rows one fragment follows
get the same warps along their rows.

Attention written with a row statistic shared by two gemms (TileLang's sparse-MLA and
MLA-decode kernels: ``m_i`` and ``alpha`` index the rows of both ``acc_s``, 64x64, and
``acc_o``, 64x256) needs the two accumulators to spread their rows alike: a fragment
indexed by the rows of both takes one layout. The planner's Square policy gives a
64x64 tile 2x2 warps and a 64x256 one 1x4, whose rows are spread differently, and
layout inference would stop at "needs two different layouts". Where fragments link
accumulators of one M row to row (``_links``: a statement of a ``T.Parallel`` indexing
both by its first variable, a row reduction, followed through the fragments between
them) and their mma.sync plans split the rows over a
different number of warps, each is planned again with every warp along its rows
(``FullRow``), when every one of them fits so, each has the default policy (Square) and
they are different accumulators (one accumulator's gemms of two policies stay the error
that says so); wgmma plans (a warpgroup's 64 rows, 16
a warp) already agree and are left alone, as is every gemm without such a link.
"""
from __future__ import annotations

import ast
from dataclasses import replace

from tilejit import syntax
from tilejit.ir.gemm_plan import GemmPlanError, plan_gemm
from tilejit.ir.plan import FRAGMENT
from tilejit.passes.fragment_subscripts import is_parallel


def _links(fdef, tiles, ctx) -> dict:
    """Union-find roots over the fragments that follow one another's rows: in a statement
    of a ``T.Parallel`` loop, the fragments indexed first by the loop's first variable
    (``acc_o[i, j] *= alpha[i]``); a call from a 2-d fragment to a 1-d one (a row
    reduction, ``T.reduce_max(acc_s, m, dim=1)``) or between 1-d ones (``T.copy(m,
    m_prev)``)."""
    fragments = [n for n, t in tiles.items() if t.kind == FRAGMENT]
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
        if isinstance(node, ast.For) and is_parallel(node, ctx):
            first = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
            if not isinstance(first, ast.Name):
                continue
            for st in node.body:
                join(sorted({n.value.id for n in syntax.walk(st) if isinstance(n, ast.Subscript)
                             and isinstance(n.value, ast.Name) and _first_index(n) == first.id}))
        elif isinstance(node, ast.Call):
            names = [a.id for a in node.args[:2] if isinstance(a, ast.Name) and a.id in parent]
            if len(names) == 2 and len(tiles[names[1]].shape) == 1 and \
                    len(tiles[names[0]].shape) in (1, 2):
                join(names)
    return {f: find(f) for f in fragments}


def _first_index(sub):
    index = sub.slice.elts[0] if isinstance(sub.slice, ast.Tuple) else sub.slice
    return index.id if isinstance(index, ast.Name) else None


def unify_warp_rows(fdef: ast.FunctionDef, ctx) -> None:
    gemms = ctx.plan.gemms
    mma = {gid: g for gid, g in gemms.items() if g[0].engine == "mma"}
    if len(mma) < 2:
        return
    root = _links(fdef, ctx.plan.tiles, ctx)
    groups: dict = {}
    for gid, (gp, _a, _b, c, _line) in mma.items():
        if c in root:
            groups.setdefault((root[c], gp.M), []).append(gid)
    for gids in groups.values():
        if len({gemms[g][0].warps_m for g in gids}) < 2:
            continue
        if any(gemms[g][0].policy != "Square" for g in gids) or \
                len({gemms[g][3] for g in gids}) < 2:
            continue            # a policy the kernel chose, or one accumulator: as written
        try:
            # the gemm's own plan with FullRow's warp grid: every other field kept (a
            # region's origin, a sparse gemm's metadata orientation)
            plans = {g: replace(gp, policy="FullRow", warps_m=row.warps_m,
                                warps_n=row.warps_n)
                     for g in gids for gp in [gemms[g][0]]
                     for row in [plan_gemm(gp.M, gp.N, gp.K, gp.dtypes, gp.transpose_A,
                                           gp.transpose_B, "FullRow", gp.threads,
                                           gp.clear_accum)]}
        except GemmPlanError:
            continue            # not every one fits: the conflict stays, named
        if len({p.warps_m for p in plans.values()}) != 1:
            continue
        for g, p in plans.items():
            gemms[g] = (p, *gemms[g][1:])

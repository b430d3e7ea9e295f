"""Pass: order generic-proxy writes of shared memory before wgmma's reads of it.

``wgmma.mma_async`` reads its shared operands through the async proxy, as TMA writes
them. A tile that ordinary instructions write (``T.copy`` by threads, ``cp.async``,
``T.Parallel`` stores, ``T.fill``) and a wgmma then reads needs, in every writing
thread, ``fence.proxy.async.shared::cta`` after the writes and before the barrier that
publishes them (PTX ISA, "Async Proxy"). The block barriers that already separate those
writes from the gemm (``barriers.py``, the pipeline's wait) are where the fence goes:
when any wgmma operand is touched by anything other than a TMA load or a gemm, the plan's
``proxy_fence`` makes every block barrier of the kernel ``fence.proxy.async`` + ``bar.sync``.
A kernel whose wgmma operands only TMA writes pays nothing.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.ir.markers import GEMM, TILE, TMA_LOAD


def fence_generic_writes(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    operands = set()
    for gp, a, b, _c, _line in plan.gemms.values():
        if gp.engine == "wgmma":
            operands.update(n for n in (a, b) if gp.a_smem is not None or n == b)
    if not operands:
        return fdef
    # a view (T.reshape / T.view) of an operand, or the tile an operand views, writes the
    # operand's bytes too
    operands = set().union(*(plan.aliases(n) for n in operands))
    allowed = set()                 # ids of the Name nodes inside gemm and TMA-load calls
    for node in syntax.walk(fdef):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in (GEMM, TMA_LOAD, TILE)):
            allowed.update(id(n) for n in syntax.walk(node) if isinstance(n, ast.Name))
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and node.id in operands and id(node) not in allowed:
            if isinstance(node.ctx, ast.Load):
                plan.proxy_fence = True
                break
    return fdef

"""Pass: ``T.sync_grid()``, the barrier of the whole grid, found and checked; the plan
records that the kernel has one (the launch is then cooperative: ``runtime/kernel.py``).

Every thread of every block must reach it, the same number of times. That thread
divergence is checked where the block barriers are (``barriers.py``: not under a branch
or loop that depends on the thread index, not in a ``T.Parallel``, where it becomes a
block barrier, the grid's arrival by thread 0 of the block, and a block barrier). This
pass refuses what has no meaning or is not built:

- inside a ``T.Pipelined`` loop: the pipeline moves the loop's copies across iterations,
  and so across the barrier;
- in a kernel with ``T.ws`` warpgroup roles: each role runs the program by itself;
- on AMDGPU: the grid barrier is built for CUDA only;
- inside a ``T.Persistent`` loop: its last wave's blocks without a tile skip the body
  (``frontend/persistent.py``'s guard), so they would never reach the barrier.

A barrier under a branch on the block index that not every block takes hangs on the GPU
too; that is the simulator's to report (a ``DeadlockError``), since it depends on values.

The plan's ``grid_sync`` also keeps the compiler's own warp specialization off
(``warp_specialize.py``): its producer warpgroup runs the loads only and would never
reach the barrier; and its TMA loads and stores (``tma.py``, ``tma_store.py``): a TMA
load after the barrier would read other blocks' ordinary stores through the async proxy,
which the barrier's release and acquire do not order without a proxy fence, and a TMA
store in flight at the barrier would not be complete for the blocks that read it after.
Pipelined copies stay ``cp.async``, stores ordinary ones. (A kernel's own ``T.tma_copy``
is its own protocol.)

How the barrier works (``codegen/lowering/grid_sync.py``): one 32-bit word in global
memory per loaded kernel. At each barrier, thread 0 of block (0, 0, 0) adds
``2^31 - (blocks - 1)`` and thread 0 of every other block 1 (``atom.add.release.gpu``),
so the word's top bit flips when the last block arrives and the lower bits are back to
0; each waits (``ld.acquire.gpu``) until the top bit differs from the value it saw
when it arrived. The word needs no reset between barriers or launches.
"""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.persistent import PREFIX as PERSIST_PREFIX
from tilejit.frontend.source import resolve_static


def check_grid_syncs(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    calls = [n for n in syntax.walk(fdef) if isinstance(n, ast.Call)
             and resolve_static(n.func, ctx.namespace) is T.sync_grid]
    if not calls:
        return fdef
    for call in calls:
        if call.args or call.keywords:
            raise ctx.error("T.sync_grid() takes no arguments", call)
    if ctx.target.kind == "amdgpu":
        raise ctx.error("T.sync_grid(): the grid barrier is built for CUDA only (not yet for "
                        "AMDGPU)", calls[0])
    if any(_is_ws_block(n, ctx) for n in syntax.walk(fdef)):
        raise ctx.error("T.sync_grid() in a kernel with T.ws warpgroup roles is not built: "
                        "each role runs the program by itself", calls[0])
    for node in syntax.walk(fdef):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                resolve_static(node.iter.func, ctx.namespace) is T.Pipelined:
            inner = next((c for c in syntax.walk(node) if c in calls), None)
            if inner is not None:
                raise ctx.error("T.sync_grid() inside a T.Pipelined loop: the pipeline moves "
                                "the loop's copies across iterations, and so across the "
                                "barrier; use a T.serial loop", inner)
    for node in syntax.walk(fdef):
        if isinstance(node, ast.If) and any(
                isinstance(n, ast.Name) and n.id.startswith(PERSIST_PREFIX)
                for n in syntax.walk(node.test)):
            inner = next((c for s in node.body for c in syntax.walk(s) if c in calls), None)
            if inner is not None:
                raise ctx.error("T.sync_grid() inside a T.Persistent loop: the last wave's "
                                "blocks without a tile skip the loop's body and would never "
                                "reach the barrier; loop over the waves with T.serial and "
                                "guard the tile's work, not the barrier", inner)
    ctx.plan.grid_sync = True
    return fdef


def _is_ws_block(node, ctx) -> bool:
    if not isinstance(node, ast.With):
        return False
    return any(isinstance(item.context_expr, ast.Call)
               and resolve_static(item.context_expr.func, ctx.namespace) is T.ws
               for item in node.items)

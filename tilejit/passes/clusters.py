"""Pass: the cluster forms of a ``T.ClusterKernel`` (``language/cluster.py``).

- ``T.block_rank_in_cluster()`` becomes ``cluster_rank()`` (``%cluster_ctarank``; 0 in
  a kernel without clusters); ``T.cluster_sync()``, ``T.cluster_arrive()``,
  ``T.cluster_arrive_relaxed()`` and ``T.cluster_wait()`` the cluster barrier's
  ``barrier.cluster`` instructions.
- ``T.copy_cluster(src, dst, cluster_mask=m)`` becomes ``T.copy(src, dst)`` carrying
  ``m`` (the attribute ``MULTICAST_ATTR``): every block of the mask names the same region
  (the contract the simulator checks), so a block's own copy is always right, and the
  warp-specialized TMA pipeline may instead issue it once for the whole mask
  (``warp_specialize.py``); other schedules load it per block.

Clusters need sm_90 or newer: a kernel launched in clusters for another target is a
compile error, as is a mask naming ranks beyond the cluster or a copy between blocks'
shared memories (``dst_block=``), which is not built.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import (CLUSTER_ARRIVE, CLUSTER_RANK, CLUSTER_SYNC, CLUSTER_WAIT,
                                LANGUAGE, MULTICAST_ATTR)
from tilejit.language.cluster import check_cluster_mask
from tilejit.passes.static_eval import NotStatic, StaticEval


# the cluster barrier's forms: (marker, its literal arguments)
_BARRIERS = {T.cluster_sync: (CLUSTER_SYNC, ()), T.cluster_wait: (CLUSTER_WAIT, ()),
             T.cluster_arrive: (CLUSTER_ARRIVE, (False,)),
             T.cluster_arrive_relaxed: (CLUSTER_ARRIVE, (True,))}


class _Rewrite(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        fn = resolve_static(node.func, self.ctx.namespace)
        if fn is T.block_rank_in_cluster:
            if node.args or node.keywords:
                raise self.ctx.error("T.block_rank_in_cluster() takes no arguments", node)
            return ast.copy_location(ast.Call(ast.Name(CLUSTER_RANK, ast.Load()), [], []), node)
        if fn is T.copy_cluster:
            return self._copy(node)
        barrier = _BARRIERS.get(fn)
        if barrier is not None:
            if node.args or node.keywords:
                raise self.ctx.error(f"T.{fn.__name__}() takes no arguments", node)
            if not self.ctx.target.is_sim and not self.ctx.target.has_clusters:
                raise self.ctx.error(f"T.{fn.__name__}: the cluster barrier needs sm_90 or "
                                     f"newer; this kernel is compiled for {self.ctx.target}",
                                     node)
            name, args = barrier
            return ast.copy_location(ast.Call(ast.Name(name, ast.Load()),
                                              [ast.Constant(a) for a in args], []), node)
        return node

    def _copy(self, node):
        keywords = {k.arg: k.value for k in node.keywords}
        unknown = set(keywords) - {"cluster_mask", "dst_block", "remote_barrier"}
        if len(node.args) != 2 or unknown or None in keywords:
            raise self.ctx.error("T.copy_cluster(src, dst, cluster_mask=m) takes a source, a "
                                 "destination and the mask", node)
        if "dst_block" in keywords or "remote_barrier" in keywords:
            raise self.ctx.error("T.copy_cluster(..., dst_block=, remote_barrier=): copies "
                                 "into a peer block's shared memory are not built; "
                                 "cluster_mask= (a multicast load) is", node)
        if "cluster_mask" not in keywords:
            raise self.ctx.error("T.copy_cluster needs cluster_mask= (bit r: the block of "
                                 "rank r in the cluster)", node)
        try:
            mask = self.static.value(keywords["cluster_mask"])
        except NotStatic:
            raise self.ctx.error(f"T.copy_cluster's cluster_mask must be known at compile "
                                 f"time, got `{ast.unparse(keywords['cluster_mask'])}`",
                                 node) from None
        try:
            mask = check_cluster_mask(mask, self.ctx.plan.cluster_blocks)
        except ValueError as e:
            raise self.ctx.error(f"{e} (cluster_dims {self.ctx.plan.cluster})", node) from None
        copy = ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy", ast.Load()),
                        node.args, [])
        setattr(copy, MULTICAST_ATTR, mask)
        return ast.copy_location(copy, node)


def lower_cluster_forms(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if ctx.plan.cluster != (1, 1, 1) and not ctx.target.is_sim and not ctx.target.has_clusters:
        raise ctx.error(f"T.ClusterKernel: thread block clusters need sm_90 or newer; this "
                        f"kernel is compiled for {ctx.target} (cluster_dims "
                        f"{ctx.plan.cluster})", fdef)
    return syntax.fix_missing_locations(_Rewrite(ctx, fdef).visit(fdef))

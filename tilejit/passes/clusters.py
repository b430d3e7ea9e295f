"""Pass: the cluster forms of a ``T.ClusterKernel`` (``language/cluster.py``).

- ``T.block_rank_in_cluster()`` becomes ``cluster_rank()`` (``%cluster_ctarank``; 0 in
  a kernel without clusters); ``T.cluster_sync()``, ``T.cluster_arrive()``,
  ``T.cluster_arrive_relaxed()`` and ``T.cluster_wait()`` the cluster barrier's
  ``barrier.cluster`` instructions.
- ``T.copy_cluster(src, dst, cluster_mask=m)`` becomes ``T.copy(src, dst)`` carrying
  ``m`` (the attribute ``MULTICAST_ATTR``). Every block of the mask receives the region
  of the mask's lowest rank (TileLang's multicast): where the region reads a block
  index along the cluster axes the mask spans or the cluster rank, the source becomes
  the issuer's (those replaced by the issuer's, the names computed from them expanded),
  so a block's own copy is always right; the
  warp-specialized TMA pipeline may instead issue it once for the whole mask
  (``warp_specialize.py``); other schedules load it per block.

Clusters need sm_90 or newer: a kernel launched in clusters for another target is a
compile error, as is a mask naming ranks beyond the cluster or a copy between blocks'
shared memories (``dst_block=``), which is not built.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import (BLOCK_INDEX, CLUSTER_ARRIVE, CLUSTER_RANK, CLUSTER_SYNC,
                                CLUSTER_WAIT, LANGUAGE, MULTICAST_ATTR)
from tilejit.language.cluster import check_cluster_mask
from tilejit.passes.dependence import dependent_names
from tilejit.passes.static_eval import NotStatic, StaticEval


# the cluster barrier's forms: (marker, its literal arguments)
_BARRIERS = {T.cluster_sync: (CLUSTER_SYNC, ()), T.cluster_wait: (CLUSTER_WAIT, ()),
             T.cluster_arrive: (CLUSTER_ARRIVE, (False,)),
             T.cluster_arrive_relaxed: (CLUSTER_ARRIVE, (True,))}


class _Rewrite(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx, self.fdef = ctx, fdef
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.copy_cluster):
            return self.generic_visit(node)
        node = self.generic_visit(node)
        mine = node.value
        mask = getattr(mine, MULTICAST_ATTR, None)
        leader = _leader_source(self.ctx, self.fdef, mine.args[0], mask, node) \
            if mask else None
        if leader is not None:      # the mask's blocks receive the issuer's region
            mine.args[0] = leader
        return node

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
        base = node.args[0].value if isinstance(node.args[0], ast.Subscript) else node.args[0]
        if not (isinstance(base, ast.Name) and base.id in self.ctx.param_dtypes):
            raise self.ctx.error(f"T.copy_cluster(src, dst, cluster_mask=m): the source must be "
                                 f"a global tensor or a region of one, got "
                                 f"`{ast.unparse(node.args[0])}`", node)
        copy = ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy", ast.Load()),
                        node.args, [])
        setattr(copy, MULTICAST_ATTR, mask)
        return ast.copy_location(copy, node)


def _rank_coords(rank, cluster):
    cx, cy, _ = cluster
    return rank % cx, rank // cx % cy, rank // (cx * cy)


def _leader_source(ctx, fdef, src, mask, node):
    """``src`` as the lowest rank of ``mask`` (the issuer) names it, for the blocks of
    the mask (TileLang's multicast: they receive the issuer's region), or None where the
    region reads neither a block index along an axis the mask spans nor the cluster rank
    (directly or through names computed from them): the same region in every block.
    Each such block index becomes the issuer's (``(b // c) * c + issuer's coordinate``),
    the cluster rank the issuer's; a name computed from them, assigned once from
    registers (not memory), is expanded into its expression. A region computed from them
    otherwise (a loop's variable, a name assigned twice, a value read from memory), or
    in a kernel with ``T.use_swizzle``, is a CompileError."""
    cluster = ctx.plan.cluster
    ranks = [r for r in range(mask.bit_length()) if mask >> r & 1]
    issuer = ranks[0]
    varying = {d for d in range(3) if len({_rank_coords(r, cluster)[d] for r in ranks}) > 1}
    if not varying:
        return None

    def block_form(expr):
        """("rank", None) or ("index", d) for a cluster rank / block index call along a
        varying axis, else None."""
        if not isinstance(expr, ast.Call):
            return None
        if isinstance(expr.func, ast.Name) and expr.func.id == CLUSTER_RANK or \
                resolve_static(expr.func, ctx.namespace) is T.block_rank_in_cluster:
            return "rank", None
        if isinstance(expr.func, ast.Name) and expr.func.id == BLOCK_INDEX and \
                isinstance(expr.args[0], ast.Constant) and expr.args[0].value in varying:
            return "index", expr.args[0].value
        return None

    assigned: dict = {}             # name -> the statements that bind it
    for n in syntax.walk(fdef):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        for t in targets:
            for name in syntax.walk(t):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                    assigned.setdefault(name.id, []).append(n)
    seeds = {name for name, stmts in assigned.items() for st in stmts
             if any(block_form(x) is not None for x in syntax.walk(
                 st.iter if isinstance(st, ast.For) else st.value or st))}
    dependent = _control_dependent(fdef, dependent_names(fdef, seeds), seeds, node)

    def refuse(why):
        return ctx.error(f"T.copy_cluster(cluster_mask={mask:#b}): the source "
                         f"`{ast.unparse(src)}` {why}: tilejit cannot evaluate it for the "
                         f"block that issues the mask's copy (rank {issuer}, whose region "
                         f"every block of the mask receives); compute the region from the "
                         f"block index directly", node)

    def expand(expr, swap, seen=()):
        """``expr`` with the dependent names expanded and each block form replaced by
        ``swap(form, call)``."""
        def visit(n):
            form = block_form(n)
            if form is not None:
                return swap(form, n)
            if isinstance(n, ast.Name) and seen and n.id not in dependent and \
                    len(assigned.get(n.id, [])) > 1:
                raise refuse(f"is computed from `{seen[-1]}`, which reads `{n.id}`, assigned "
                             f"more than once")
            if isinstance(n, ast.Name) and n.id in dependent:
                defs = assigned.get(n.id, [])
                if n.id in seen or len(defs) != 1 or not (
                        isinstance(defs[0], ast.Assign) and len(defs[0].targets) == 1
                        and isinstance(defs[0].targets[0], ast.Name)):
                    raise refuse(f"reads `{n.id}`, computed from the block index in a loop "
                                 f"or in several assignments")
                if any(isinstance(x, ast.Subscript) for x in syntax.walk(defs[0].value)):
                    raise refuse(f"reads `{n.id}`, computed from the block index and memory "
                                 f"(`{ast.unparse(defs[0].value)}`), which may change before "
                                 f"the copy")
                return expand(copy.deepcopy(defs[0].value), swap, seen + (n.id,))
            for field, value in ast.iter_fields(n):
                if isinstance(value, ast.AST):
                    setattr(n, field, visit(value))
                elif isinstance(value, list):
                    setattr(n, field, [visit(v) if isinstance(v, ast.AST) else v
                                       for v in value])
            return n
        return visit(expr)

    if not any(isinstance(n, ast.Name) and n.id in dependent or block_form(n) is not None
               for n in syntax.walk(src)):
        return None             # the same region in every block
    if any(isinstance(n, ast.Call) and resolve_static(n.func, ctx.namespace) is T.use_swizzle
           for n in syntax.walk(fdef)):
        raise ctx.error(f"T.copy_cluster(cluster_mask={mask:#b}): a region computed from the "
                        f"block index in a kernel with T.use_swizzle is not supported (the "
                        f"cluster is the launch's blocks, the region the swizzled index's); "
                        f"drop T.use_swizzle or name one region for the whole cluster", node)
    lead = _rank_coords(issuer, cluster)
    full = mask == (1 << cluster[0] * cluster[1] * cluster[2]) - 1

    def to_issuer(form, call):
        if form[0] == "rank":
            value = ast.Constant(issuer)
        else:
            d = form[1]
            value = ast.BinOp(ast.BinOp(ast.BinOp(call, ast.FloorDiv(), ast.Constant(
                cluster[d])), ast.Mult(), ast.Constant(cluster[d])), ast.Add(),
                ast.Constant(lead[d]))
        if full:
            return value
        in_mask = ast.Compare(ast.BinOp(ast.BinOp(ast.Constant(mask), ast.RShift(), ast.Call(
            ast.Name(CLUSTER_RANK, ast.Load()), [], [])), ast.BitAnd(), ast.Constant(1)),
            [ast.NotEq()], [ast.Constant(0)])
        return ast.IfExp(in_mask, value, copy.deepcopy(call))
    return syntax.fix_missing_locations(expand(copy.deepcopy(src), to_issuer))


def _control_dependent(fdef, dependent, seeds, site) -> set:
    """``dependent`` and the names assigned under a loop or branch whose range or test
    reads one (``for i in range(bx): row += 16``), to a fixpoint; a loop or branch that
    holds ``site`` (the copy) leaves its names to their data dependence."""
    dependent = set(dependent)
    while True:
        added = set()
        for n in syntax.walk(fdef):
            head = n.iter if isinstance(n, ast.For) else \
                n.test if isinstance(n, (ast.If, ast.While)) else None
            if head is None or not any(isinstance(x, ast.Name) and x.id in dependent
                                       for x in syntax.walk(head)):
                continue
            if any(x is site for x in syntax.walk(n)):
                continue
            for stmt in n.body + n.orelse:
                added.update(x.id for x in syntax.walk(stmt) if isinstance(x, ast.Name)
                             and isinstance(x.ctx, ast.Store) and x.id not in dependent)
        if not added:
            return dependent
        dependent |= dependent_names(fdef, seeds | dependent | added)


def lower_cluster_forms(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if ctx.plan.cluster != (1, 1, 1) and not ctx.target.is_sim and not ctx.target.has_clusters:
        raise ctx.error(f"T.ClusterKernel: thread block clusters need sm_90 or newer; this "
                        f"kernel is compiled for {ctx.target} (cluster_dims "
                        f"{ctx.plan.cluster})", fdef)
    return syntax.fix_missing_locations(_Rewrite(ctx, fdef).visit(fdef))

"""Pass: choose every tile's layout, and turn ``T.Parallel`` loops over fragments into
loops over each thread's registers.

Two steps of the pipeline live here. ``choose_operand_layouts`` runs first: shared tiles'
layouts and each gemm's engine (mma.sync, wgmma, MFMA), which fix the layouts of the
fragments the gemms use (``fixed_fragment_layouts``). ``passes/layout_conversion.py``
then converts, through shared memory, the data flows that join two fragments whose
fixed layouts differ, and ``infer_layouts`` lays out every fragment.

Fragments. Uses that fix a layout: the accumulator of ``T.gemm`` (its warp tiling of
m16n8 tiles) and a ``T.gemm`` A operand held in registers. Uses that tie layouts
together: ``T.copy`` between two fragments and a ``T.Parallel`` loop indexing several
fragments (where two fixed layouts would meet, the conversion pass has already cut the
tie). Each group of tied fragments takes the one fixed layout among its members (two
different ones are a ``CompileError`` naming both uses) or, if none, the ``T.Parallel``
distribution of its shape (``layouts.parallel_fragment``).

A ``T.Parallel`` over a fragment's shape then iterates that fragment's layout: thread
t visits its own slots s, the loop indices are the layout's coordinates of (t, s), and
``F[i, j]`` reads register s:

    for i, j in T.Parallel(M, N):        for s in __tj_frag_loop("L0"):
        C[i, j] = T.max(C[i, j], 0)  →       i, j = __tj_frag_index("L0", s)
                                             __tj_frag_set(C, s, T.max(__tj_frag_get(C, s), 0))

The loop is fully unrolled, so every slot is a constant and the fragment lives in
registers. A fragment indexed any other way is a ``CompileError``.

A ``T.Parallel`` over part of a fragment (issue 27): ``F[k, j]`` in a loop over ``j``,
where the positions that are not the loop's indices (all of them, in order) are fixed
within the loop (a serial loop's variable, a constant; no loop index, nothing the body
assigns), as TileLang's decode combine writes ``lse_local[k, j]``. The rule: the loop
iterates a layout L of its own shape (a stand-in fragment ``__tj_part<k>``, tied to the
loop's other fragments as a fragment over its whole shape would be), and F holds, in
every thread, L's elements for every value of the fixed positions: F's layout is L with
each fixed dimension added as one slot digit above L's slots (``_expand``: slot
``s + L.slots·c``, c the fixed indices numbered row-major), so ``F[k, j]`` is slot
``s + L.slots·k`` of the thread that holds j, and a ``T.reduce`` of F over a fixed
dimension is per thread, giving L (where F's layout is fixed, by a gemm, a fixed
dimension may be held in any slot digits of each thread: index c is slot
``Σ ((c // place) % size) · stride`` over its digits, ``fixed_slot``; a dimension split
by ``F[i, X * n + j]`` is one, through a view: ``split_indices.py``). The two derive from
each other (``_expand``,
``_restrict``: L is F's layout at fixed values of those positions, which only slot
digits may move); when neither is fixed, L is the ``T.Parallel`` distribution of the
loop's shape and F follows. A fragment whose layout spreads a fixed dimension over
threads (a gemm accumulator indexed ``C[i, j]`` in a serial loop over i), or indexed in
part along different dimensions, is a ``CompileError`` naming both uses. With the
enclosing loop unrolled (a compile-time trip count, small bodies) every slot is again a
constant; otherwise the slot is computed and the fragment lives in local memory, as in
TileLang.

Shared tiles read by ``T.gemm`` get the bank-conflict-free swizzled layout
(``layouts.make_swizzled_layout``); ``T.annotate_layout({tile: layout})`` sets one
explicitly; other shared tiles are row-major.
"""
from __future__ import annotations

import ast
import copy
import itertools
import math

import numpy as np

from tilejit import syntax
from tilejit.log import logger
from tilejit import language as T
from tilejit.frontend.source import flatten_statements, resolve_static
from tilejit.layouts import (make_swizzled_layout, offset_table, parallel_fragment,
                             row_groups_fragment)
from tilejit.ir.addressing import (S_VAR, BinOp, Const, ParallelLayout, Var, digit_indexing,
                                   evaluate, fragment_indexing, row_major, substitute)
from tilejit.ir.view_layout import ViewLayout
from tilejit.ir.digits import (Digit, DigitLayout, ReshapeError, digit_layout, idle_copies,
                               merged_digits, reduce_layout, reshape_layout)
from tilejit.ir.markers import (ATOMICS, FRAG_GET, FRAG_INDEX, FRAG_LOOP, FRAG_SET, FRAG_SLOT,
                                FRAG_VALID, FRAG_WRITER, TILE)
from tilejit.ir.gemm_plan import with_wgmma, with_wgmma_rs
from tilejit.ir.plan import FRAGMENT, LOCAL, SHARED, Tile, compute_dtype
from tilejit.ir.smem_layouts import canonical_layout
from tilejit.passes.warp_rows import unify_warp_rows
from tilejit.passes.fragment_subscripts import (constant_index, dropped_positions,
                                                quotient_positions,
                                                mixed_positions,
                                                index_names, loop_names,
                                                partial_positions)
from tilejit.passes.dependence import dependent_names
from tilejit.passes.prefix_loops import widen_prefix_loops
from tilejit.passes.whole_fragments import (GATHERED_FRAGMENT_MAX, constant_read_fragments,
                                            gathered_fragments, scalar_fragments)
from tilejit.passes.static_eval import NotStatic, StaticEval
from tilejit.passes.tma_store import copy_to_tensor
from tilejit.passes.loop_layouts import (loop_layout, loop_layout_node, observable,
                                         reads_threads)
from tilejit.passes.user_fragments import annotated_fragment
from tilejit.passes.user_layouts import AnnotationScope, annotated_layout

SLOT = "__tj_s"


def same_fragment(f, g) -> bool:
    """Whether two register fragment layouts are the same (threads, slots, replicas)."""
    return (f.shape == g.shape and f.thread_layout == g.thread_layout
            and f.slot_layout == g.slot_layout and f.num_threads == g.num_threads
            and f.replicate == g.replicate)


class UnionFind:
    """Names tied together (path-halving union-find)."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)




def _base_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
        return node.args[0].id           # __tj_region(A, ...)
    return None


def _same_indices(sub, loop_vars, shape) -> bool:
    """``F[i, j]`` with the loop's indices in order; a 0 stands for the index of an
    extent-1 dimension (``x[0, column]`` in a loop over ``_, column``)."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if len(elts) != len(loop_vars):
        return False
    for e, v, n in zip(elts, loop_vars, shape):
        if isinstance(e, ast.Name) and e.id == v:
            continue
        if isinstance(e, ast.Constant) and e.value == 0 and n == 1:
            continue
        return False
    return True





class _Collect(syntax.NodeVisitor):
    """Fragment loops and copies between fragments."""

    def __init__(self, ctx, whole=frozenset(), static=None):
        self.ctx = ctx
        self.static = static
        # a fragment every thread holds whole is read at any index: no loop's layout
        self.frags = {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT} - set(whole)
        self.loops: list = []     # (loop, fragments indexed by all its indices, subset uses)
        self.copies: list[tuple[str, str, int]] = []
        self.partners: dict[str, set] = {}   # fragment -> dtypes of tensors copied with it
        # id(loop) -> {fragment: [((fixed positions, dropped loop positions), subscript)]}
        self.mixed: dict[int, dict] = {}
        # id(loop) -> {fragment: ({position: divisor}, subscript)}: ``B[i, j // 2]``
        self.quotients: dict[int, dict] = {}
        # fragment -> its reads in T.Parallel loops at indices that name none of the
        # loop's indices nor anything computed from them (``row_max[i]`` in a loop over j,
        # i a serial loop's variable): every iteration reads one element, which every
        # thread must then hold (TileLang replicates such a fragment)
        self.broadcast: dict[str, list] = {}
        self.reads_threads = False      # the kernel reads the thread index / warp lanes
        self.schedules: list = []       # loops whose loop_layout= is a schedule only

    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace) is T.Parallel:
            loop_vars = loop_names(node.target) or []
            body = ast.Module(body=node.body, type_ignores=[])
            varying = set(loop_vars) | {n.id for n in syntax.walk(body) if isinstance(n, ast.Name)
                                        and isinstance(n.ctx, ast.Store)}
            full, subset, partial = [], {}, {}
            # a serial loop's variable over a range of its own is not one of these:
            # b[k, j] with `for k in T.serial(n)` inside holds every k in each thread
            dependent = dependent_names(body, loop_vars)
            # and a serial loop's variable inside the iteration fixes a position too:
            # F[i, j] over `for i in T.serial(n)` in a loop over j (vllm's mHC post mean)
            inner = {n.target.id for n in syntax.walk(body) if isinstance(n, ast.For)
                     and isinstance(n.target, ast.Name)} - dependent
            for sub in syntax.walk(body):
                if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                        and sub.value.id in self.frags):
                    continue
                name, idx = sub.value.id, index_names(sub)
                if constant_index(sub) is not None:
                    continue                  # F[0]: an element every thread holds
                if loop_vars and isinstance(sub.ctx, ast.Load) and not (
                        {n.id for n in syntax.walk(sub.slice) if isinstance(n, ast.Name)}
                        & (dependent | (varying - inner))):
                    self.broadcast.setdefault(name, []).append((sub, loop_vars))
                    continue
                dropped = dropped_positions(idx, loop_vars)
                fixed = partial_positions(sub, loop_vars, varying - inner) if loop_vars \
                    else None
                mixed = mixed_positions(sub, loop_vars, dependent) if loop_vars else None
                if dropped and name not in full:
                    subset.setdefault(name, (dropped, sub))
                elif fixed is not None and name not in full:
                    partial.setdefault(name, []).append((fixed, sub))
                elif mixed is not None and name not in full:
                    self.mixed.setdefault(id(node), {}).setdefault(name, []).append(
                        (mixed, sub))
                elif (quot := self._quotient(sub, loop_vars)) is not None and \
                        name not in full:
                    self.quotients.setdefault(id(node), {}).setdefault(name, []).append(
                        (quot, sub))
                elif name not in full:
                    full.append(name)
            mixed = self.mixed.get(id(node), {})
            quotients = self.quotients.get(id(node), {})
            for name in full:
                subset.pop(name, None)
                partial.pop(name, None)
                mixed.pop(name, None)
                quotients.pop(name, None)
            if loop_layout_node(node) is not None and not observable(
                    node, bool(full or subset or partial or mixed or quotients),
                    self.reads_threads, self.ctx.namespace):
                # a schedule only (loop_layouts.py): checked, then tilejit's own lays the
                # loop out
                self.schedules.append(node)
            elif full or subset or partial or mixed or quotients or \
                    loop_layout_node(node) is not None:
                self.loops.append((node, full, subset, partial))
        self.generic_visit(node)

    def _quotient(self, sub, loop_vars):
        if self.static is None or not loop_vars or isinstance(sub.ctx, ast.Store):
            return None
        return quotient_positions(sub, loop_vars, self.static.value)

    def visit_Call(self, node):
        fn = resolve_static(node.func, self.ctx.namespace)
        if fn is T.copy and len(node.args) == 2 and all(
                isinstance(a, ast.Name) and a.id in self.frags for a in node.args):
            self.copies.append((node.args[0].id, node.args[1].id, node.lineno))
        elif fn is T.copy and len(node.args) == 2:
            # the dtype of a tensor a fragment is copied from or to: it sets how many
            # consecutive elements a thread holds (16-byte global accesses)
            names = [_base_name(a) for a in node.args]
            for frag, other in (names, names[::-1]):
                if frag in self.frags and other in self.ctx.param_dtypes:
                    self.partners.setdefault(frag, set()).add(self.ctx.param_dtypes[other])
        self.generic_visit(node)


class _RewriteLoops(syntax.NodeTransformer):
    def __init__(self, ctx, loop_ids):
        self.ctx = ctx
        self.loop_ids = loop_ids          # id(For node) -> (loop id, fragment names)
        self.frags = {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT}
        self.whole = set()          # scalar fragments (_scalar_fragments): held whole
        self.partial = {}           # (loop id, fragment) -> slot stride of each fixed position
        self.partial_names = {}     # (loop id, fragment) -> the loop indices it is indexed by
        self.broadcast = {}         # id of a read at an index none of its loop's -> the
        #                             loop's indices (_Collect.broadcast)
        self.current: set[str] | None = None
        self.counter = 0

    def visit_For(self, node):
        key = self.loop_ids.get(id(node))
        if key is None:
            return self.generic_visit(node)
        lid, names, loop_vars = key
        outer = self.current
        # the loop's indices of extent 1 (`T.Parallel(1, D)`): a fragment indexed by the
        # others is still one element per iteration
        units = {v for v, a in zip(loop_vars, node.iter.args)
                 if isinstance(a, ast.Constant) and a.value == 1}
        self.current = (set(names), loop_vars, lid, units)
        body = [self.visit(s) for s in node.body]
        self.current = outer
        slot = f"{SLOT}{self.counter}"
        self.counter += 1
        index = ast.Assign([ast.Tuple([ast.Name(v, ast.Store()) for v in loop_vars], ast.Store())
                            if len(loop_vars) > 1 else ast.Name(loop_vars[0], ast.Store())],
                           ast.Call(ast.Name(FRAG_INDEX, ast.Load()),
                                    [ast.Constant(lid), ast.Name(slot, ast.Load())], []))
        if self.ctx.plan.loops[lid][1].writer is not None:
            body = [self._one_copy_stores(s, lid) for s in body]
        body = [ast.copy_location(index, node)] + flatten_statements(body)
        if self.ctx.plan.loops[lid][1].valid is not None:
            test = ast.Call(ast.Name(FRAG_VALID, ast.Load()),
                            [ast.Constant(lid), ast.Name(slot, ast.Load())], [])
            body = [body[0], ast.copy_location(ast.If(test, body[1:], []), node)]
        loop = ast.For(ast.Name(slot, ast.Store()),
                       ast.Call(ast.Name(FRAG_LOOP, ast.Load()), [ast.Constant(lid)], []),
                       body, [], None)
        return ast.copy_location(loop, node)

    def _one_copy_stores(self, stmt, lid):
        """In a loop over a layout several threads hold copies of (every copy runs each
        iteration), a store to a tensor or a shared tile made by one copy only: `Y[i] =
        Y[i] + r[i]` by two copies would add twice; an atomic statement likewise."""
        memory = set(self.ctx.params) | {n for n, t in self.ctx.plan.tiles.items()
                                         if t.kind == SHARED}

        class Guard(syntax.NodeTransformer):
            def _guarded(self, node, targets):
                if not any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                           and t.value.id in memory for t in targets):
                    return node
                test = ast.Call(ast.Name(FRAG_WRITER, ast.Load()), [ast.Constant(lid)], [])
                return ast.copy_location(ast.If(test, [node], []), node)

            def visit_Assign(self, node):
                return self._guarded(node, node.targets)

            def visit_AugAssign(self, node):
                return self._guarded(node, [node.target])

            def visit_Expr(self, node):
                # an atomic statement (fla's gated backward: T.atomic_add(dg[j], r[j])
                # over a reduction's result): applied by one copy, as a store is
                if not _is_atomic(node.value):
                    return node
                test = ast.Call(ast.Name(FRAG_WRITER, ast.Load()), [ast.Constant(lid)], [])
                return ast.copy_location(ast.If(test, [node], []), node)

            def visit_For(self, node):
                return self.generic_visit(node)

        return Guard().visit(stmt)

    def _whole_slot(self, sub, loop=None):
        """``F[k]`` of a fragment every thread holds whole, at a computed index: slot s
        holds the element s in row-major order (checked), so the slot is the flat
        index. ``loop``: the T.Parallel whose iterations all read the element (a read
        at an index not the loop's own), for the error."""
        t = self.ctx.plan.tiles[sub.value.id]
        ix = t.indexing
        order = list(itertools.product(*(range(e) for e in t.shape)))
        if ix.slots != len(order) or any(
                tuple(evaluate(c, {"t": th, "s": s}) for c in ix.coords) != order[s]
                for th in range(self.ctx.threads) for s in range(ix.slots)):
            if loop is not None:
                raise self.ctx.error(
                    f"`{ast.unparse(sub)}` reads fragment {sub.value.id!r} (shape {t.shape}) "
                    f"at an index that is none of the T.Parallel's own ({', '.join(loop)}), "
                    f"so every thread must hold all of it, and its layout spreads it over "
                    f"the threads (a loop over its shape, a gemm or a reduction that lays it "
                    f"out so); copy it to a shared tile, or to a fragment of at most "
                    f"{GATHERED_FRAGMENT_MAX} elements used only this way", sub)
            raise self.ctx.error(
                f"fragment {sub.value.id!r}: an element at a computed index, "
                f"`{ast.unparse(sub)}`, needs a fragment every thread holds in order", sub)
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        flat = None
        for e, extent in zip(elts, t.shape):
            flat = e if flat is None else ast.BinOp(
                ast.BinOp(flat, ast.Mult(), ast.Constant(extent)), ast.Add(), e)
        return flat

    def _constant_slot(self, sub, consts):
        """``F[0]`` outside a loop over F (a row max of shape (1,)): allowed when every
        thread holds that element, at one slot."""
        t = self.ctx.plan.tiles[sub.value.id]
        ix = t.indexing
        slot = None
        for s in range(ix.slots):
            if tuple(evaluate(c, {"t": 0, "s": s}) for c in ix.coords) == consts:
                slot = s
                break
        holds = slot is not None and all(
            tuple(evaluate(c, {"t": th, "s": slot}) for c in ix.coords) == consts
            for th in range(self.ctx.threads))
        if not holds:
            raise self.ctx.error(
                f"fragment {sub.value.id!r} is spread over the block's threads: element "
                f"{list(consts)} is not held by every thread, so index it inside a T.Parallel "
                f"over its shape {t.shape}", sub)
        return ast.Constant(slot)

    def _partial_slot(self, sub):
        """``F[k, j]`` in a loop over ``j``: the slot of ``F[0, j]`` (a map of the loop's
        slot) plus each fixed index times its slot stride (``_partial_slots``)."""
        lid, name = self.current[2], sub.value.id
        strides = self.partial[(lid, name)]
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        loop_vars = self.partial_names.get((lid, name), list(self.current[1]))
        if [e.id for k, e in enumerate(elts) if k not in strides
                and isinstance(e, ast.Name)] != loop_vars or len(elts) - len(strides) != len(
                    loop_vars):
            raise self.ctx.error(
                f"fragment {name!r} is indexed in part in this loop: index it with the loop's "
                f"indices [{', '.join(loop_vars)}] in order at the same positions everywhere "
                f"in the loop, got `{ast.unparse(sub)}`", sub)
        slot = ast.Call(ast.Name(FRAG_SLOT, ast.Load()),
                        [ast.Constant(lid), ast.Constant(name),
                         ast.Name(f"{SLOT}{self.counter}", ast.Load())], [])
        for k, digits in strides.items():
            if digits:
                slot = ast.BinOp(slot, ast.Add(), fixed_slot(elts[k], digits))
        return slot

    def _slot(self, sub: ast.Subscript, store=False):
        name = sub.value.id
        consts = constant_index(sub)
        if consts is not None:
            return self._constant_slot(sub, consts)
        if (name in self.whole or name in self.ctx.plan.user_fragments) and (
                self.current is None or name not in self.current[0]):
            # (a fragment annotated with a layout every thread holds whole, in order:
            # TileLang's make_fully_replicated_layout_fragment, indexed by serial code)
            return self._whole_slot(sub)
        if id(sub) in self.broadcast:
            return self._whole_slot(sub, self.broadcast[id(sub)])
        if self.current is not None and (self.current[2], name) in self.partial:
            return self._partial_slot(sub)
        if (self.current is not None and (self.current[2], name) in self.ctx.plan.slot_maps
                and index_names(sub) != list(self.current[1])):
            if store and not set(self.current[1]) - set(index_names(sub)) <= self.current[3]:
                raise self.ctx.error(
                    f"fragment {name!r} is indexed with only some of the loop's indices; it "
                    f"can be read there, but written only in a T.Parallel over its own shape",
                    sub)
            return ast.Call(ast.Name(FRAG_SLOT, ast.Load()),
                            [ast.Constant(self.current[2]), ast.Constant(name),
                             ast.Name(f"{SLOT}{self.counter}", ast.Load())], [])
        if self.current is None or name not in self.current[0]:
            raise self.ctx.error(
                f"fragment {name!r} is spread over the block's threads: index it only inside "
                f"a `for ... in T.Parallel(...)` over its shape {self.ctx.plan.tiles[name].shape}, "
                f"with the loop's indices", sub)
        if not _same_indices(sub, self.current[1], self.ctx.plan.tiles[name].shape):
            raise self.ctx.error(
                f"fragment {name!r} must be indexed with the T.Parallel loop's indices "
                f"[{', '.join(self.current[1])}] in order (each thread holds only its own "
                f"elements), got `{ast.unparse(sub)}`", sub)
        return ast.Name(f"{SLOT}{self.counter}", ast.Load())

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.frags:
            if not isinstance(node.ctx, ast.Load):
                raise self.ctx.error("unsupported use of a fragment element", node)
            return ast.copy_location(ast.Call(ast.Name(FRAG_GET, ast.Load()),
                                              [node.value, self._slot(node)], []), node)
        return node

    def _store(self, target, value, node):
        slot = self._slot(target, store=True)
        return ast.copy_location(ast.Expr(ast.Call(ast.Name(FRAG_SET, ast.Load()),
                                                   [target.value, slot, value], [])), node)

    def visit_Assign(self, node):
        t = node.targets[0]
        if (len(node.targets) == 1 and isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name) and t.value.id in self.frags):
            return self._store(t, self.visit(node.value), node)
        return self.generic_visit(node)

    def visit_AugAssign(self, node):
        t = node.target
        if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id in self.frags):
            load = ast.Subscript(t.value, t.slice, ast.Load())
            ast.copy_location(load, t)
            value = ast.BinOp(self.visit(load), node.op, self.visit(node.value))
            return self._store(t, ast.copy_location(value, node), node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        call = node.value
        if (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.annotate_layout):
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)


def _static_extents(loop, static) -> list:
    """The loop's extents, each a compile-time value or None."""
    extents = []
    for a in loop.iter.args:
        try:
            extents.append(static.value(a))
        except NotStatic:
            extents.append(None)
    return extents


def _parallel_layout(shape, dtypes, threads, usable=None):
    """The T.Parallel distribution, each thread holding runs of 16 bytes of the
    narrowest dtype involved (the fragment's and those of the tensors it is copied
    with), as many as the shape allows. ``usable(layout)``: narrower runs are tried
    when the widest distribution fails it (a fragment indexed by a subset of a loop's
    indices needs the reduced layout: with 1536 columns and 256 threads, runs of 8 leave
    192 threads holding a row, no power of two, while runs of 2 use all 256)."""
    narrowest = min(d.itemsize for d in dtypes)
    vec = max(1, 16 // narrowest)
    first = None
    while vec >= 1:
        if shape[-1] % vec == 0:
            try:
                frag = parallel_fragment(shape, threads, vec)
            except ValueError:
                frag = None
            if frag is not None:
                if usable is None or usable(frag):
                    return frag, vec
                first = first or (frag, vec)
        vec //= 2
    if usable is not None:
        # a row the block's threads do not divide (softmax over 1000 or 192 columns on
        # 128 threads): spread it over fewer threads, a power of two that divides the
        # row, and repeat that layout over the rest of the block (replicas)
        group = threads // 2
        while group >= 1:
            if shape[-1] % group == 0 and threads % group == 0:
                for frag, v in ((row_groups_fragment(shape, group, threads), None),
                                (_replicas(shape, group, threads), 1)):
                    if frag is not None and usable(frag):
                        return frag, v      # (None: indexed by its digits, not a flat run)
            group //= 2
    if first is not None:
        return first
    try:
        return parallel_fragment(shape, threads, 1), 1
    except ValueError:
        return ParallelLayout(tuple(shape), threads, 1), 1


def _replicas(shape, group, threads):
    """The T.Parallel distribution over ``group`` threads, held by each of the block's
    ``threads // group`` groups."""
    try:
        return parallel_fragment(shape, group, 1).replicated(threads // group)
    except ValueError:
        return None


def _out_of_bounds_error(ctx, loop, loop_vars, extents, tile):
    """A loop of the fragment's rank that runs past one of its extents indexes it out of
    bounds (TileLang's attention-sink backward: `sinks` of shape (heads,) written in a
    T.Parallel over block_M): say so, with the index and the extent."""
    if len(extents) != len(tile.shape):
        return
    guarded = {n.id for node in syntax.walk(ast.Module(body=loop.body, type_ignores=[]))
               if isinstance(node, (ast.If, ast.IfExp, ast.While))
               for n in syntax.walk(node.test) if isinstance(n, ast.Name)}
    for var, ext, dim in zip(loop_vars, extents, tile.shape):
        if var in guarded:
            continue            # `if i < 64:` may keep it inside: the general error says
        if ext is not None and ext > dim:
            raise ctx.error(f"index {var!r} of this T.Parallel runs to {ext - 1}, past the "
                            f"extent {dim} of fragment {tile.name!r} (shape {tile.shape}): "
                            f"an access out of its bounds", loop)


def _foreign_index_error(ctx, loop, loop_vars, tile):
    """The error for a fragment a T.Parallel reads at an index that is not the loop's own
    (``acc[i, j]`` with j a serial loop's variable, ``A[i, j // 32]`` of a large
    fragment), where there is one: such an element may be held by another thread."""
    for sub in syntax.walk(ast.Module(body=loop.body, type_ignores=[])):
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                and sub.value.id == tile.name) or index_names(sub) == list(loop_vars):
            continue
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        if len(elts) < len(loop_vars):
            continue
        whole = (f"; a fragment of at most {GATHERED_FRAGMENT_MAX} elements that no T.Parallel "
                 f"writes is held whole by every thread and may be read at any index "
                 f"({tile.name!r} has {math.prod(tile.shape)})"
                 if isinstance(sub.ctx, ast.Load) else "")
        raise ctx.error(
            f"`{ast.unparse(sub)}` indexes the thread-distributed fragment {tile.name!r} "
            f"(shape {tile.shape}) at an index that is not the T.Parallel's own "
            f"(T.Parallel({', '.join(_extents_text(loop))}) over {', '.join(loop_vars)}): each "
            f"thread holds only the elements its iterations of a loop over the whole fragment "
            f"would give it. To sum or take the maximum along a dimension use T.reduce_sum / "
            f"T.reduce_max{whole}; otherwise go through a shared tile", sub)


def _extents_text(loop):
    return [ast.unparse(a) for a in loop.iter.args]


def _widen_unit_loops(fdef, ctx):
    """``for j in T.Parallel(N): F[0, j] = ...`` with F of shape (1, N) (TileLang's
    style): the loop gets the unit dimension too, ``for u, j in T.Parallel(1, N)``, so F
    is indexed by all of the loop's indices (its 0 standing for the extent-1 index);
    fragments indexed ``[j]`` in it are then a subset of the loop's indices."""
    frags = {n: t.shape for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT}
    count = 0
    for loop in syntax.walk(fdef):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and
                resolve_static(loop.iter.func, ctx.namespace) is T.Parallel):
            continue
        loop_vars = loop_names(loop.target)
        if not loop_vars or len(loop.iter.args) != len(loop_vars) or loop.iter.keywords:
            continue
        units = None
        for sub in syntax.walk(ast.Module(body=loop.body, type_ignores=[])):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                    and sub.value.id in frags):
                continue
            shape = frags[sub.value.id]
            elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            if len(elts) <= len(loop_vars) or len(elts) != len(shape):
                continue
            names = [e.id for e in elts if isinstance(e, ast.Name)]
            zeros = [k for k, e in enumerate(elts) if isinstance(e, ast.Constant)
                     and e.value == 0 and shape[k] == 1]
            if names == loop_vars and len(names) + len(zeros) == len(elts):
                units = zeros if units is None or units == zeros else False
            elif units is not False:
                units = False       # F[k, j] of a larger F: the loop is over part of F
        if not units:
            continue
        targets = list(loop.target.elts) if isinstance(loop.target, ast.Tuple) else \
            [loop.target]
        args = list(loop.iter.args)
        for k in units:
            targets.insert(k, ast.Name(f"__tj_unit{count}", ast.Store()))
            args.insert(k, ast.Constant(1))
            count += 1
        loop.target = ast.copy_location(ast.Tuple(targets, ast.Store()), loop.target)
        loop.iter.args = args
    return syntax.fix_missing_locations(fdef)


def choose_operand_layouts(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    """The first step: shared tiles' layouts (row-major; swizzled where T.gemm reads them
    or a TMA store writes them out; ``T.annotate_layout``) and each gemm's engine, which
    fix the layouts of the gemm's fragments (``fixed_fragment_layouts``)."""
    annotations = [n for n in syntax.walk(fdef) if isinstance(n, ast.Call)
                   and resolve_static(n.func, ctx.namespace) is T.annotate_layout]
    _shared_layouts(ctx, annotations, fdef)
    _store_staging_tiles(ctx, fdef)
    _choose_gemm_engines(ctx)
    unify_warp_rows(fdef, ctx)      # mma.sync accumulators one row fragment links
    return fdef


def fixed_fragment_layouts(ctx) -> dict[str, tuple]:
    """fragment -> (layout, line, reason) for each fragment a gemm fixes the layout of:
    its accumulator, its A operand held in registers. A fragment two gemms want in two
    different layouts is a ``CompileError`` naming both."""
    fixed: dict[str, tuple] = {}
    users = ctx.plan.user_fragments       # T.Fragment annotations (user_fragments.py)
    for gp, a, _b, c, line in ctx.plan.gemms.values():
        demands = [(c, gp.c_fragment(), "the accumulator of T.gemm")]
        if ctx.plan.tiles[a].kind == FRAGMENT:
            demands.append((a, gp.a_fragment(), "the A operand of T.gemm held in registers"))
        for name, frag, reason in demands:
            user = users.get(name)
            if user is not None and name not in fixed:
                if not same_layout(user[0], frag):
                    raise ctx.error(f"Layout infer conflict: fragment {name!r} needs two "
                                    f"different layouts: {user[2]} (line {user[1]}: "
                                    f"{ctx.source_line(user[1])}) and {reason} (line {line}: "
                                    f"{ctx.source_line(line)}); annotate the gemm's own "
                                    f"layout, or let the gemm write another fragment and "
                                    f"T.copy it into this one", line)
            old = fixed.get(name)
            if old is not None and not same_fragment(old[0], frag):
                raise ctx.error(f"Layout infer conflict: fragment {name!r} needs two different "
                                f"layouts: {old[2]} (line "
                                f"{old[1]}: {ctx.source_line(old[1])}) and {reason} (line "
                                f"{line}: {ctx.source_line(line)})", line)
            fixed.setdefault(name, (frag, line, reason))
    for name, user in users.items():          # equal to a gemm's: the gemm's layout
        fixed.setdefault(name, user)
    return fixed


class _DerivationConflict(Exception):
    """Two derivations give one group of fragments different layouts: ``uses`` holds
    (fragment, line) of each; ``error`` the CompileError naming both."""

    def __init__(self, uses):
        super().__init__("layout derivations conflict")
        self.uses, self.error, self.loop = uses, None, None


_MAX_READ_CONVERSIONS = 4


def infer_layouts(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    """Every fragment's layout (``_infer_layouts``). A fragment that a T.Parallel only
    reads at a subset of its indices (``a[ii]`` in a loop over (ii, j), a broadcast),
    whose layout that read would make conflict with another derivation (a reduction's
    result tied to it), is read there from a shared copy instead, as a layout
    conversion (``layout_conversion.read_through_shared``), and the layouts inferred
    again; the IR dump marks the conversion."""
    last = None
    for _ in range(_MAX_READ_CONVERSIONS + 1):
        tiles_before = dict(ctx.plan.tiles)
        with syntax.deep_trees():
            attempt = copy.deepcopy(fdef)
        try:
            return _infer_layouts(attempt, ctx)
        except _DerivationConflict as conflict:
            ctx.plan.tiles.clear()
            ctx.plan.tiles.update(tiles_before)
            last = conflict.error
            if conflict.loop is None:
                raise last from None
            name, line, col = conflict.loop
            loop = next(n for n in syntax.walk(fdef) if isinstance(n, ast.For)
                        and (n.lineno, n.col_offset) == (line, col))
            from tilejit.passes.layout_conversion import read_through_shared  # (a circle)
            read_through_shared(ctx, fdef, loop, name, last.bare_message)
    raise last from None


def _infer_layouts(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    tiles = plan.tiles
    fdef = _widen_unit_loops(fdef, ctx)
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    fdef = widen_prefix_loops(fdef, ctx, static)
    gathered = gathered_fragments(fdef, ctx, static)
    col = _Collect(ctx, gathered, static)
    col.reads_threads = reads_threads(fdef, ctx.namespace)
    col.visit(fdef)
    groups = UnionFind()
    fixed = fixed_fragment_layouts(ctx)
    scope = AnnotationScope(ctx, fdef) if col.schedules or any(
        loop_layout_node(loop) is not None for loop, *_ in col.loops) else None
    for loop in col.schedules:
        loop_layout(ctx, scope, loop, _static_extents(loop, static))      # (its checks)
        loop.iter.keywords = [k for k in loop.iter.keywords if k.arg != "loop_layout"]
    for src, dst, line in col.copies:
        if tiles[src].shape != tiles[dst].shape:
            raise ctx.error(f"T.copy between fragments of different shapes {tiles[src].shape} "
                            f"and {tiles[dst].shape}", line)
        groups.union(src, dst)
    derived = []          # (source fragment, target fragment, dims removed, keep, line, why)
    loop_ids = {}
    views = dict(tiles)          # the tiles, and a stand-in for each loop over part of one
    leads = {}                   # id(loop) -> the fragment whose layout the loop iterates
    partial_uses = {}            # (loop id, fragment) -> the fixed positions
    quotient_views = {}          # (loop id, fragment) -> (stand-in, its dropped dims)
    mixed_uses = {}              # (loop id, fragment) -> (fixed positions, dropped loop dims)
    subset_reads = {}            # (fragment, line) -> (it, its loop's line and column)
    for k, (loop, full, subset, partial) in enumerate(col.loops):
        loop_vars = loop_names(loop.target)
        if loop_vars is None:
            raise ctx.error("a T.Parallel over a fragment must bind plain names", loop)
        extents = _static_extents(loop, static)
        for n in full:
            if tuple(extents) != tiles[n].shape:
                _foreign_index_error(ctx, loop, loop_vars, tiles[n])
                _out_of_bounds_error(ctx, loop, loop_vars, extents, tiles[n])
                raise ctx.error(f"a T.Parallel over fragment {n!r} must cover its shape "
                                f"{tiles[n].shape}; this loop covers {tuple(extents)} (a loop "
                                f"over part of it indexes it with all of the loop's indices, in "
                                f"order, and indices that do not change within the loop: "
                                f"`F[k, j]` in a loop over j, k a serial loop's variable)", loop)
            groups.union(n, full[0])
        lead = full[0] if full else None
        if loop_layout_node(loop) is not None:
            # T.Parallel(..., loop_layout=F): a stand-in of the loop's shape whose layout
            # is F's (loop_layouts.py); the fragments the loop indexes take it
            stand = f"__tj_loop{k}"
            dtype = tiles[lead].dtype if lead is not None else T.float32
            views[stand] = Tile(stand, FRAGMENT, tuple(extents), dtype, loop.lineno)
            fixed[stand] = loop_layout(ctx, scope, loop, extents)
            if lead is not None:
                groups.union(stand, lead)
            lead = stand
        if partial:
            # a stand-in fragment of the loop's shape: the loop iterates its layout, and
            # each fragment indexed in part holds, per thread, that layout's elements for
            # every value of its fixed positions (_expand / _restrict)
            lead_name = f"__tj_part{k}"
            first = next(iter(partial))
            views[lead_name] = Tile(lead_name, FRAGMENT, tuple(extents), tiles[first].dtype,
                                    loop.lineno)
            col.partners[lead_name] = set(col.partners.get(first, ()))
            if lead is not None:
                groups.union(lead_name, lead)
            lead = lead_name
            for n, uses in partial.items():
                held = uses[0][0]
                for other, sub in uses:
                    if other != held:
                        raise ctx.error(f"fragment {n!r} is indexed in part at different "
                                        f"positions in one T.Parallel: `{ast.unparse(uses[0][1])}`"
                                        f" and `{ast.unparse(sub)}`", sub)
                sub = uses[0][1]
                kept = tuple(e for j, e in enumerate(tiles[n].shape) if j not in held)
                if kept != tuple(extents):
                    raise ctx.error(f"fragment {n!r} of shape {tiles[n].shape} is indexed "
                                    f"`{ast.unparse(sub)}` in a T.Parallel over extents "
                                    f"{tuple(extents)}; the loop must cover the dimensions it "
                                    f"indexes ({kept})", sub)
                why = (f"indexed in part, `{ast.unparse(sub)}`, in the T.Parallel at line "
                       f"{loop.lineno}")
                derived.append((lead_name, n, held, _EXPAND, sub.lineno, why, False))
                derived.append((n, lead_name, held, _RESTRICT, sub.lineno, why, False))
                partial_uses[(f"L{k}", n)] = held
        if lead is None and subset and len({tuple(d) for d, _ in subset.values()}) == 1:
            # no fragment has all the loop's indices (a loop over a shared tile reading
            # row fragments, TileLang's flash-decoding `S_shared[h, k] = ... / logsum[h]`;
            # all of them indexed by the same indices):
            # the loop follows a stand-in of its shape in which each thread holding
            # element h of such a fragment takes every k (_expand)
            lead = f"__tj_part{k}"
            first = next(iter(subset))
            views[lead] = Tile(lead, FRAGMENT, tuple(extents), tiles[first].dtype, loop.lineno)
            col.partners[lead] = set(col.partners.get(first, ()))
            for n, (dropped, sub) in subset.items():
                derived.append((n, lead, dropped, _EXPAND, sub.lineno,
                                f"the layout of a T.Parallel at line {loop.lineno} that reads "
                                f"`{ast.unparse(sub)}` and no fragment with all its indices",
                                False))
        for n, (dropped, sub) in subset.items():
            if lead is None:
                raise ctx.error(f"fragment {n!r} is indexed with only some of this loop's "
                                f"indices; the loop must also index a fragment with all of them "
                                f"(whose layout it then follows), or index every such "
                                f"fragment with the same indices", sub)
            kept = tuple(e for j, e in enumerate(extents) if j not in dropped)
            if kept != tiles[n].shape:
                raise ctx.error(f"fragment {n!r} of shape {tiles[n].shape} is indexed with loop "
                                f"indices of extents {kept}", sub)
            derived.append((lead, n, dropped, False, sub.lineno,
                            f"indexed by a subset of the loop over {lead!r}", False))
            if n not in _stored_fragments(loop):
                subset_reads[(n, sub.lineno)] = (n, loop.lineno, loop.col_offset)
        mixed = col.mixed.get(id(loop), {})
        if lead is None and mixed:
            # no fragment has all the loop's indices, one is read at some of them and fixed
            # positions (fla's `s[j, c] = ... * g[kb * 32 + c]`, g split to g_v[kb, c]):
            # the loop follows a stand-in of its shape whose layout is that fragment's,
            # restricted to the fixed positions, each thread taking every dropped index
            lead = f"__tj_part{k}"
            first = next(iter(mixed))
            views[lead] = Tile(lead, FRAGMENT, tuple(extents), tiles[first].dtype, loop.lineno)
            col.partners[lead] = set(col.partners.get(first, ()))
            stand_in = lead
        else:
            stand_in = None
        for n, uses in mixed.items():
            # b[k, j] in a loop over (i, j): the loop's layout without i (each thread
            # holding a j of it, as a reduction's result), then every k held in slots
            (held, dropped), sub = uses[0]
            if lead is None or any(u != uses[0][0] for u, _ in uses):
                raise ctx.error(f"fragment {n!r} is indexed in part (`{ast.unparse(sub)}`) in "
                                f"a T.Parallel that indexes no fragment with all its indices, "
                                f"or in two ways", sub)
            kept = tuple(e for j, e in enumerate(extents) if j not in dropped)
            if tuple(e for j, e in enumerate(tiles[n].shape) if j not in held) != kept:
                raise ctx.error(f"fragment {n!r} of shape {tiles[n].shape} is indexed "
                                f"`{ast.unparse(sub)}` in a T.Parallel over extents "
                                f"{tuple(extents)}: its loop-indexed dimensions must be the "
                                f"loop's ({kept})", sub)
            row = f"__tj_mixed{k}_{n}"
            views[row] = Tile(row, FRAGMENT, kept, tiles[n].dtype, loop.lineno)
            why = (f"indexed `{ast.unparse(sub)}` (a subset of the loop's indices and fixed "
                   f"positions) in the T.Parallel at line {loop.lineno}")
            derived.append((lead, row, dropped, False, sub.lineno, why, False))
            derived.append((row, n, held, _EXPAND, sub.lineno, why, False))
            if stand_in is not None:
                derived.append((n, row, held, _RESTRICT, sub.lineno, why, False))
                derived.append((row, stand_in, dropped, _EXPAND, sub.lineno, why, False))
            mixed_uses[(f"L{k}", n)] = (held, dropped)
        for n, uses in col.quotients.get(id(loop), {}).items():
            quotient_views[(f"L{k}", n)] = _quotient_view(ctx, views, derived, k, n, uses,
                                                          lead, extents, loop)
        leads[id(loop)] = lead
        loop_ids[id(loop)] = (f"L{k}", full, loop_vars)
    for src, dst, dim, line in plan.reductions:
        if tiles[src].kind == FRAGMENT and tiles[dst].kind == FRAGMENT:
            keep = len(tiles[dst].shape) == len(tiles[src].shape)
            derived.append((src, dst, (dim,), keep, line, f"T.reduce of {src!r}", True))
    viewed = set()
    for t in list(tiles.values()):
        if t.kind == FRAGMENT and t.view_of:
            # T.reshape of a fragment: each layout is the other's through the row-major
            # renumbering (ir/digits.reshape_layout), whichever is chosen first
            why = f"a view of {t.view_of!r} (T.reshape at line {t.line})"
            derived.append((t.view_of, t.name, None, _RESHAPE, t.line, why, False))
            derived.append((t.name, t.view_of, None, _RESHAPE, t.line, why, False))
            viewed |= {t.name, t.view_of}
    scalars = (scalar_fragments(fdef, ctx) | gathered) - set(plan.user_fragments) - viewed
    plan.whole_by_use = frozenset(scalars)
    try:
        _resolve(ctx, views, groups, fixed, derived, col.partners, scalars,
                 constant_read_fragments(fdef, ctx) - set(plan.user_fragments) - viewed,
                 set(col.broadcast) - set(plan.user_fragments) - viewed)
    except _DerivationConflict as conflict:
        conflict.loop = next((subset_reads[u] for u in conflict.uses if u in subset_reads),
                             None)
        raise
    _check_fragment_views(ctx, tiles)
    partial_slots = {}
    partial_names = {}           # (loop id, fragment) -> the loop indices of a mixed use
    for loop, _full, subset, partial in col.loops:
        lid = loop_ids[id(loop)][0]
        lead = views[leads[id(loop)]]
        plan.loops[lid] = (lead.layout, lead.indexing)
        if lead.indexing.writer is not None and _has_valued_atomic(loop):
            raise ctx.error("an atomic whose previous value is used, in a T.Parallel over a "
                            "replicated fragment (a T.gemm A operand in registers, or a "
                            "reduction's result): its iterations run on several threads, "
                            "and only one copy may apply the atomic, so the others would "
                            "have no previous value; copy the fragment to a shared tile "
                            "first and loop over that", loop.lineno)
        for n, (dropped, _) in subset.items():
            red = _reduction(ctx, lead.layout, dropped, False, loop.lineno)
            plan.slot_maps[(lid, n)] = red[1]
        for n in col.mixed.get(id(loop), {}):
            held, dropped = mixed_uses[(lid, n)]
            red = _reduction(ctx, lead.layout, dropped, False, loop.lineno)
            kept_slot, strides = _partial_slots(ctx, tiles[n], held, loop.lineno)
            slot_map = _compose(kept_slot, red[1])
            _check_partial(ctx, tiles[n], lead.indexing, slot_map, strides, loop.lineno,
                           dropped, written=n in _stored_fragments(loop))
            plan.slot_maps[(lid, n)] = slot_map
            partial_slots[(lid, n)] = strides
            partial_names[(lid, n)] = [v for j, v in enumerate(loop_ids[id(loop)][2])
                                       if j not in dropped]
        for (qlid, n), (stand, dropped) in quotient_views.items():
            if qlid == lid:
                red = _reduction(ctx, views[stand].layout, dropped, False, loop.lineno)
                plan.slot_maps[(lid, n)] = red[1]
        for n in partial:
            slot_map, strides = _partial_slots(ctx, tiles[n], partial_uses[(lid, n)],
                                               loop.lineno)
            _check_partial(ctx, tiles[n], lead.indexing, slot_map, strides, loop.lineno,
                           written=n in _stored_fragments(loop))
            plan.slot_maps[(lid, n)] = slot_map
            partial_slots[(lid, n)] = strides
    _plan_reduction_scratch(ctx, tiles)
    rewrite = _RewriteLoops(ctx, loop_ids)
    rewrite.whole = scalars
    rewrite.broadcast = {id(sub): loop_vars for uses in col.broadcast.values()
                         for sub, loop_vars in uses}
    rewrite.partial = partial_slots
    rewrite.partial_names = partial_names
    return rewrite.visit(fdef)


def _quotient_view(ctx, views, derived, k, n, uses, lead, extents, loop):
    """``B[i, j // c]`` in the T.Parallel ``loop`` (its k-th) over ``extents`` laid out as
    ``lead``: B's element ``(i, q)`` is wanted by the iterations ``(i, c·q + r)``, r < c.
    The loop's layout seen with each divided dimension split in two (``(i, q, r)``, a
    row-major reshape, ``ir/digits.reshape_layout``) and reduced along the ``r`` parts
    (``reduce_layout``) holds B in the thread of each of those iterations, each element
    once per thread: B takes that layout (threads whose ``r`` digits differ hold
    replicas), and the loop reads B at that reduction's slot map. Returns (the stand-in's
    name, the reshaped dimensions B leaves out)."""
    tiles = ctx.plan.tiles
    (quot, sub), rest = uses[0], uses[1:]
    for other, osub in rest:
        if other != quot:
            raise ctx.error(f"fragment {n!r} is indexed in two ways in one T.Parallel: "
                            f"`{ast.unparse(sub)}` and `{ast.unparse(osub)}`", osub)
    if lead is None:
        raise ctx.error(f"fragment {n!r} is indexed `{ast.unparse(sub)}` in a T.Parallel "
                        f"that indexes no fragment with all its indices, whose layout it "
                        f"would follow", sub)
    shape, dropped, want = [], [], []
    for j, e in enumerate(extents):
        c = quot.get(j)
        if c is None:
            shape.append(e)
            want.append(e)
            continue
        if e is None or e % c:
            raise ctx.error(f"fragment {n!r} is indexed `{ast.unparse(sub)}`: the loop's "
                            f"extent {e} along that index is not a multiple of {c}", sub)
        shape += [e // c, c]
        dropped.append(len(shape) - 1)
        want.append(e // c)
    if tuple(want) != tiles[n].shape:
        raise ctx.error(f"fragment {n!r} of shape {tiles[n].shape} is indexed "
                        f"`{ast.unparse(sub)}` in a T.Parallel over extents {tuple(extents)}, "
                        f"which gives the shape {tuple(want)}", sub)
    stand = f"__tj_part_q{k}_{n}"
    views[stand] = Tile(stand, FRAGMENT, tuple(shape), tiles[n].dtype, loop.lineno)
    why = f"indexed `{ast.unparse(sub)}` in the T.Parallel at line {loop.lineno}"
    derived.append((lead, stand, None, _RESHAPE, sub.lineno, why, False))
    derived.append((stand, n, tuple(dropped), False, sub.lineno, why, False))
    return stand, tuple(dropped)


def _shared_layouts(ctx, annotations, fdef):
    """Row-major, swizzled where T.gemm reads the tile, or as annotated."""
    tiles = ctx.plan.tiles
    for t in tiles.values():
        if t.kind == SHARED:
            t.layout = row_major(t.shape)
    for _gp, a, b, _c, line in ctx.plan.gemms.values():
        for name in (a, b):
            t = tiles[name]
            if t.kind == SHARED:
                t.layout = make_swizzled_layout(t.shape, t.dtype.itemsize)
                t.layout_reason = f"swizzled for T.gemm at line {line}"
    scope = AnnotationScope(ctx, fdef) if annotations else None
    for call in annotations:
        _annotate(call, ctx, scope)
    _viewed_shared_layouts(ctx)


def _viewed_shared_layouts(ctx):
    """A shared tile with views (``T.reshape`` / ``T.view``) and its views are row-major:
    a view renumbers the elements row-major, which a swizzle of either name would not
    keep. A gemm reading one takes the row-major tile (mma.sync's ldmatrix, wgmma's
    no-swizzle descriptor); a layout the kernel annotates, or pipeline stages, are an
    error."""
    tiles = ctx.plan.tiles
    gemm_operands = {n for _, a, b, _, _ in ctx.plan.gemms.values() for n in (a, b)}
    for t in tiles.values():
        if t.kind != SHARED or not t.view_of:
            continue
        base = tiles[t.view_of]
        views = [v for v in tiles.values() if v.view_of == base.name]
        if base.layout_reason.startswith("T.annotate_layout") and base.stages <= 1 and all(
                v.dtype.itemsize == base.dtype.itemsize and v.stages <= 1
                and not v.layout_reason.startswith("T.annotate_layout")
                and v.name not in gemm_operands for v in views):
            # reshapes of a tile the kernel lays out (an MMA swizzle): each view reads the
            # tile's element of its own row-major number where the tile's layout puts it
            for v in views:
                v.layout = ViewLayout(base.layout, tuple(base.shape), tuple(v.shape))
                v.layout_reason = f"{base.name}'s layout seen as {v.name} (line {v.line})"
            continue
        for u in (base, *views):
            if u.stages > 1:
                raise ctx.error(f"T.reshape / T.view: {u.name!r} is staged by "
                                f"T.Pipelined ({u.stages} versions) and has views: a view of "
                                f"a pipelined shared tile is not supported; copy into a tile "
                                f"allocated outside the pipelined loop's copies", t.line)
            if u.layout_reason.startswith("T.annotate_layout") and not _is_row_major(u):
                # a layout is where the elements lie, not what they are: the views (another
                # dtype, or a staged tile's) read the tile row-major, so it is laid out so
                logger.warning("T.annotate_layout of %r set aside (line %s): its views "
                               "(T.reshape / T.view at line %s) read it row-major",
                               u.name, u.line, t.line)
            u.layout = row_major(u.shape)
            u.layout_reason = (f"row-major: viewed as {t.name} at line {t.line}" if u is base
                               else f"row-major: a view of {base.name}")


def _is_row_major(tile) -> bool:
    try:
        table = offset_table(tile.layout, tuple(tile.shape))
    except Exception:               # a user's function layout: compared by its offsets only
        return False
    return bool((np.asarray(table).reshape(-1) == np.arange(tile.size)).all())


def _store_staging_tiles(ctx, fdef):
    """On a target with TMA, a 2-d shared tile that is only written from fragments
    (``T.copy(C_f, C_s)``) and copied to global memory (``T.copy(C_s, C[...])``) gets the
    swizzled layout: the accumulator layouts' 4-byte stores to a row-major tile whose
    rows are a multiple of 128 bytes meet in one bank, and the swizzled layout is one
    TMA reads (``passes/tma_store.py`` then stores the tile by TMA)."""
    if not (ctx.target.has_tma and ctx.options.tma):
        return
    tiles = ctx.plan.tiles
    uses: dict[str, set] = {}
    seen = set()
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == TILE:
            seen.update(id(n) for n in syntax.walk(node))
        stored = copy_to_tensor(node, ctx)
        if stored is not None and tiles[stored[0]].kind == SHARED:
            uses.setdefault(stored[0], set()).add("stored")
            seen.add(id(node.args[0]))
        elif (isinstance(node, ast.Call) and len(node.args) == 2
              and resolve_static(node.func, ctx.namespace) is T.copy
              and all(isinstance(a, ast.Name) and a.id in tiles for a in node.args)
              and tiles[node.args[0].id].kind == FRAGMENT
              and tiles[node.args[1].id].kind == SHARED):
            uses.setdefault(node.args[1].id, set()).add("written")
            seen.add(id(node.args[1]))
    for node in syntax.walk(fdef):
        if (isinstance(node, ast.Name) and node.id in uses and id(node) not in seen
                and isinstance(node.ctx, ast.Load)):
            uses[node.id].add("other")
    for name, kinds in uses.items():
        t = tiles[name]
        if (kinds == {"written", "stored"} and len(t.shape) == 2 and not t.layout_reason
                and t.stages <= 1):
            t.layout = make_swizzled_layout(t.shape, t.dtype.itemsize)
            t.layout_reason = "swizzled: written from fragments, stored by TMA"


def _choose_gemm_engines(ctx):
    """On a target with wgmma (sm_90a), each gemm whose shapes, dtypes and shared
    layouts wgmma takes is re-planned onto it (``ir/gemm_plan.with_wgmma``); its shared
    operands are then aligned to their swizzle atom (the descriptors' base offset is 0).
    Every other gemm keeps mma.sync. On AMDGPU every gemm is on MFMA: planned so at tile
    allocation (``ir/gemm_plan.plan_mfma``, where an unsupported dtype or shape is an error
    at the gemm's line); its shared operands keep ``make_swizzled_layout``, which the
    MFMA lowering reads element by element or in the runs the layout keeps contiguous."""
    if ctx.target.kind == "amdgpu":
        assert all(g[0].engine in ("mfma", "fma") for g in ctx.plan.gemms.values())
        return
    if not (ctx.target.has_wgmma and ctx.options.wgmma):
        return
    tiles = ctx.plan.tiles
    for gid, (gp, a, b, c, line) in list(ctx.plan.gemms.items()):
        smem = {}
        for name in (a, b):
            t = tiles[name]
            if t.kind == SHARED:
                smem[name] = canonical_layout(t.layout, tuple(t.shape), t.dtype.itemsize)
        # the tiles' shapes: an operand may be a region of its tile (gp.a_origin)
        if tiles[a].kind == FRAGMENT:
            wg = with_wgmma_rs(gp, smem[b], tiles[b].shape)
        else:
            wg = with_wgmma(gp, smem[a], smem[b], tiles[a].shape, tiles[b].shape)
        if wg is None and gp.dtypes[0].startswith("float8") and not ctx.target.has_float8_mma:
            raise ctx.error(f"T.gemm on float8 operands runs on wgmma on {ctx.target.arch}, "
                            f"which cannot take this {gp.M}x{gp.N}x{gp.K} gemm: it needs both "
                            f"operands in shared memory and K-major (A as (M, K), B as (N, K) "
                            f"with transpose_B=True), the block's threads a multiple of 128, M "
                            f"a multiple of 64 per warpgroup, an instruction N of at most 256",
                            line)
        if wg is None:
            continue
        for name in smem:
            tiles[name].align = max(tiles[name].align, 8 * smem[name][0])
            tiles[name].layout_reason = f"wgmma's swizzled layout for T.gemm at line {line}"
        ctx.plan.gemms[gid] = (wg, a, b, c, line)


def _annotate(call, ctx, scope):
    """Each tile's layout from ``T.annotate_layout({tile: layout})`` (``user_layouts.py``)."""
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
        raise ctx.error("T.annotate_layout({tile: layout, ...}) takes one dict", call)
    for k, v in zip(call.args[0].keys, call.args[0].values):
        tile = ctx.plan.tiles.get(k.id) if isinstance(k, ast.Name) else None
        if tile is not None and tile.kind == FRAGMENT:
            ctx.plan.user_fragments[k.id] = annotated_fragment(ctx, scope, k.id, tile, v,
                                                               call.lineno)
            continue
        if tile is not None and tile.kind == LOCAL:
            # each thread's own array: no layout over threads to give it (TileLang's older
            # MLA decode examples annotate `T.alloc_local([1])` with a T.Fragment, which its
            # layout inference, laying out fragments only, leaves unused)
            continue
        if tile is None or tile.kind != SHARED:
            raise ctx.error(f"T.annotate_layout: keys must be shared or fragment tiles, got "
                            f"`{ast.unparse(k)}`", call)
        tile.layout, tile.layout_reason = annotated_layout(ctx, scope, k.id, tile, v,
                                                           call.lineno)


def _as_digits(layout):
    if isinstance(layout, ParallelLayout):
        return None
    return layout if isinstance(layout, DigitLayout) else digit_layout(layout)


def same_layout(a, b) -> bool:
    """Whether two fragment layouts put every element in the same thread and slot (their
    digit forms compared where both have one)."""
    da, db = _as_digits(a), _as_digits(b)
    if da is not None and db is not None:
        return da == db or merged_digits(da) == merged_digits(db)
    if isinstance(a, ParallelLayout) or isinstance(b, ParallelLayout):
        return a == b
    return a is b or (not isinstance(a, DigitLayout) and not isinstance(b, DigitLayout)
                      and same_fragment(a, b))


def _reduction(ctx, layout, dims, keep, line):
    """(layout of the reduced fragment, source slot -> reduced slot, Reduction steps)."""
    dl = _as_digits(layout)
    if dl is None:
        raise ctx.error(f"cannot reduce a fragment laid out as {layout}: its layout has no "
                        f"digit form", line)
    slot_map, steps = S_VAR, []
    for dim in sorted(dims, reverse=True):
        red = reduce_layout(dl, dim, keep, ctx.target.warp_size)
        if red is None:
            name = getattr(layout, "name", "") or str(layout)
            raise ctx.error(f"cannot reduce the fragment laid out as {name} along dimension "
                            f"{dim}: the threads holding one of its rows are not a "
                            f"power-of-two group (a row of {dl.shape[dim]} elements over "
                            f"{dl.threads} threads); give that dimension an extent that is "
                            f"a multiple of the thread count or a power of two, or sweep the "
                            f"row in such chunks (examples/softmax.py: online_softmax)", line)
        slot_map = substitute(red.slot_map, {}) if not steps else _compose(red.slot_map,
                                                                           slot_map)
        steps.append(red)
        dl = red.result
    return dl, slot_map, steps


_EXPAND, _RESTRICT = "expand", "restrict"      # derivations between a loop and a part
_RESHAPE = "reshape"                            # between a fragment and its view


def _reshaped(ctx, layout, src, dst, line, origin):
    """The layout of fragment ``dst``, a view of ``src`` (or ``src`` of ``dst``) laid out
    as ``layout`` (``ir/digits.reshape_layout``), or a CompileError naming both tiles,
    their shapes, where the layout came from (``origin``) and the digit the new shape
    cuts."""
    base, view = (src, dst) if dst.view_of == src.name else (dst, src)
    head = (f"T.reshape of fragment {base.name!r} ({base.dtype.name}{list(base.shape)}) as "
            f"{view.name!r} ({list(view.shape)})")
    name = getattr(layout, "name", "") or str(layout)
    dl = _as_digits(layout)
    if dl is None:
        raise ctx.error(f"{head}: {src.name!r} is laid out as {name} ({origin}), which has no "
                        f"digit form (threads and registers each stepping along the "
                        f"dimensions), so its elements cannot be renumbered in place; give "
                        f"the fragment a shape that the block's threads divide evenly", line)
    try:
        return reshape_layout(dl, dst.shape)
    except ReshapeError as e:
        raise ctx.error(f"{head}: {src.name!r} is laid out as {name} ({origin}); a view keeps "
                        f"every element in the thread and register that hold it, and in the "
                        f"shape {list(dst.shape)} {e}. Reshape along that layout's boundaries "
                        f"(merging dimensions always works), or copy the fragment into a "
                        f"shared tile and view that", line) from None


def _divided(ctx, layout, shape, line, why, origin):
    """The layout of a loop seen with a divided dimension split in two (``_quotient_view``),
    or a CompileError saying where the loop's layout cannot be split."""
    name = getattr(layout, "name", "") or str(layout)
    dl = _as_digits(layout)
    try:
        if dl is None:
            raise ReshapeError("the layout has no digit form")
        return reshape_layout(dl, shape)
    except ReshapeError as e:
        raise ctx.error(f"a fragment {why}: the loop is laid out as {name} ({origin}), and "
                        f"its elements cannot be grouped by that quotient ({e}); the divisor "
                        f"must split the layout's runs of threads and registers along that "
                        f"index evenly (power-of-two extents and divisors always do), or copy "
                        f"the fragment into a shared tile and read that", line) from None


def _check_fragment_views(ctx, tiles):
    """Every thread finds each element of a fragment's view at the slot where the
    fragment holds the element of the same row-major flat index (over all threads and
    slots, with numpy): the view shares the fragment's registers."""
    for v in tiles.values():
        if v.kind != FRAGMENT or not v.view_of:
            continue
        b = tiles[v.view_of]
        t, s = np.meshgrid(np.arange(ctx.threads), np.arange(b.indexing.slots), indexing="ij")
        env = {"t": t, "s": s}
        same = _flat_indices(b.indexing, b.shape, env) == _flat_indices(v.indexing, v.shape, env)
        if b.indexing.valid is not None:
            same |= np.broadcast_to(evaluate(b.indexing.valid, env), t.shape) == 0
        if b.indexing.slots != v.indexing.slots or not same.all():
            raise ctx.error(f"internal: T.reshape of fragment {b.name!r} as {v.name!r}: the "
                            f"view's layout ({v.layout}) does not keep the fragment's "
                            f"elements where {b.layout} holds them", v.line)


def _expand(layout, fixed, shape):
    """The layout of a fragment of ``shape`` that a T.Parallel loop laid out as ``layout``
    indexes in part (its positions ``fixed`` do not vary in the loop): each thread holds
    the loop layout's elements for every value of the fixed positions, in slots
    ``s + slots·c`` (c the row-major number of the fixed positions' values). None when
    ``layout`` has no digit form or its slots are not numbered compactly."""
    dl = _as_digits(layout)
    if dl is None or not _compact_slots(dl):
        return None
    strides, acc = {}, dl.slots
    for k in reversed(fixed):
        strides[k] = acc
        acc *= shape[k]
    kept = iter(dl.dims)
    dims = tuple(((Digit("s", strides[k], shape[k], 1),) if shape[k] > 1 else ())
                 if k in strides else next(kept) for k in range(len(shape)))
    return DigitLayout(tuple(shape), dims, dl.threads, acc,
                       f"{dl.name or 'layout'} held per thread along dims {list(fixed)}",
                       dl.base)


def _compact_slots(dl) -> bool:
    acc = 1
    for d in sorted((d for dim in dl.dims for d in dim if d.src == "s"), key=lambda d: d.stride):
        if d.stride != acc:
            return False
        acc *= d.size
    return acc == dl.slots


def _restrict(layout, fixed):
    """The layout of a loop over part of a fragment laid out as ``layout``: its
    elements at fixed values of the positions ``fixed``, which only slot digits may
    move (else None: some of those elements are held by other threads)."""
    dl = _as_digits(layout)
    if dl is None or any(d.src != "s" for k in fixed for d in dl.dims[k]):
        return None
    return _reduction_or_none(dl, fixed, False)


def _flat_indices(ix, shape, env):
    """The row-major flat index of the element each (t, s) of ``env`` holds."""
    out = np.zeros_like(env["t"])
    for c, n in zip(ix.coords, shape):
        out = out * n + np.broadcast_to(evaluate(c, env), env["t"].shape)
    return out


def _derived_or_none(layout, dims, keep, shape):
    if keep == _RESHAPE:
        dl = _as_digits(layout)
        try:
            return None if dl is None else reshape_layout(dl, shape)
        except ReshapeError:
            return None
    if keep == _EXPAND:
        return _expand(layout, dims, shape)
    if keep == _RESTRICT:
        return _restrict(layout, dims)
    return _reduction_or_none(layout, dims, keep)


def _part_layout(ctx, layout, fixed, kind, shape, line, frag, why, origin):
    """``_expand`` or ``_restrict``, or a CompileError naming the fragment ``frag``, the
    use ``why`` and where ``layout`` came from (``origin``)."""
    out = _derived_or_none(layout, fixed, kind, shape)
    if out is not None:
        return out
    layout = getattr(layout, "name", "") or layout
    if kind == _EXPAND:
        raise ctx.error(f"fragment {frag!r} is {why}; that loop is laid out as {layout} "
                        f"({origin}), which cannot be extended to the whole fragment (it needs "
                        f"a digit form with compactly numbered slots)", line)
    raise ctx.error(f"fragment {frag!r} is {why}: a loop over part of a fragment needs the "
                    f"dimension(s) it fixes, {list(fixed)}, held in each thread's registers, but "
                    f"{frag!r} is laid out as {layout!s} ({origin}), which spreads them over "
                    f"threads: a thread-distributed fragment each thread holds only part of "
                    f"(to sum or take the maximum along a dimension use T.reduce_sum / "
                    f"T.reduce_max; otherwise go through a shared tile)", line)


def _partial_slots(ctx, tile, fixed, line):
    """(slot of ``tile[..c.., j]`` for c = 0 as an Expr of the loop's slot s, the slot
    digits of each fixed position, ``(place, size, stride)``: ``fixed_slot``): the loop
    iterates ``_restrict(tile.layout)``, whose slots number the kept slot digits of the
    tile compactly."""
    dl = _as_digits(tile.layout)
    strides = {}
    for k in fixed:
        digits = dl.dims[k]
        if any(d.src != "s" for d in digits):
            raise ctx.error(f"fragment {tile.name!r} is indexed in part along dimension {k}, "
                            f"which its layout {tile.layout} spreads over threads", line)
        # index c of the dimension is in slot digits: sum of ((c // place) % size) * stride
        strides[k] = tuple((d.place, d.size, d.stride) for d in digits)
    kept = sorted((d for k in range(len(tile.shape)) if k not in fixed for d in dl.dims[k]
                   if d.src == "s"), key=lambda d: d.stride)
    expr, acc = Const(0), 1
    for d in kept:
        expr = expr + ((S_VAR // acc) % d.size) * d.stride
        acc *= d.size
    return expr, strides


def fixed_slot(c, digits):
    """The slot offset of index ``c`` of a dimension held in slot ``digits`` (``(place,
    size, stride)`` each: ``_partial_slots``); ``c`` an int or an ast expression."""
    if isinstance(c, int):
        return sum((c // place) % size * stride for place, size, stride in digits)
    out = None
    for place, size, stride in digits:
        term = c if place == 1 else ast.BinOp(c, ast.FloorDiv(), ast.Constant(place))
        if len(digits) > 1:         # one digit holds the whole (bounded) index
            term = ast.BinOp(term, ast.Mod(), ast.Constant(size))
        term = ast.BinOp(term, ast.Mult(), ast.Constant(stride))
        out = term if out is None else ast.BinOp(out, ast.Add(), term)
    return out


def _check_values(digits, extent):
    """Indices that exercise each slot digit of a fixed dimension: 0, 1, the last, and
    each digit's place times 1 and its size − 1 (its digit terms are independent)."""
    values = {0, min(1, extent - 1), extent - 1}
    for place, size, _ in digits:
        values |= {place * m for m in (1, size - 1) if place * m < extent}
    return sorted(values) if extent > 8 else range(extent)


def _stored_fragments(loop) -> set:
    """The names a T.Parallel body stores elements of (``F[...] = ``, ``F[...] += ``)."""
    return {node.value.id for node in syntax.walk(loop)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)}


def _check_partial(ctx, tile, loop_ix, slot_map, strides, line, dropped=(), written=True):
    """Every thread's slot of ``tile[..c.., j]`` holds that element, for each (t, s) of
    the loop and each value c of the fixed positions (``_check_values``). A thread that
    holds elements of a tile the loop writes must run the loop (else its copies go
    stale); one the loop only reads may hold replicas the loop does not use (a block
    wider than the loop: vllm's mHC post reads a (4, 64) fragment's columns in a loop
    over 64 of 128 threads)."""
    ix = tile.indexing
    fixed = sorted(strides)
    values = [_check_values(strides[k], tile.shape[k]) for k in fixed]
    for t in range(ctx.threads):
        runs = [s for s in range(loop_ix.slots)
                if loop_ix.valid is None or evaluate(loop_ix.valid, {"t": t, "s": s})]
        if not runs and written and (ix.valid is None or any(
                evaluate(ix.valid, {"t": t, "s": s}) for s in range(ix.slots))):
            raise ctx.error(f"internal: fragment {tile.name!r} indexed in part: thread {t} "
                            f"holds elements of it but the loop leaves the thread out", line)
        for s in runs:
            env = {"t": t, "s": s}
            here = [evaluate(c, env) for j, c in enumerate(loop_ix.coords)
                    if j not in dropped]
            base = evaluate(slot_map, env)
            for cs in itertools.product(*values):
                slot = base + sum(fixed_slot(c, strides[k]) for c, k in zip(cs, fixed))
                want = list(here)
                for k, c in zip(fixed, cs):
                    want.insert(k, c)
                got = [evaluate(c, {"t": t, "s": slot}) for c in ix.coords]
                if not 0 <= slot < ix.slots or got != want:
                    raise ctx.error(f"internal: fragment {tile.name!r} indexed in part: thread "
                                    f"{t} expects {want} at slot {slot}, which holds {got}",
                                    line)


def _reduction_or_none(layout, dims, keep):
    dl = _as_digits(layout)
    for dim in sorted(dims, reverse=True):
        if dl is None:
            return None
        red = reduce_layout(dl, dim, keep)
        if red is None:
            return None
        dl = red.result
    return dl


def _compose(outer, inner):
    """outer(s) with s := inner(s)."""
    if isinstance(outer, Var):
        return inner
    if isinstance(outer, Const):
        return outer
    return BinOp(outer.op, _compose(outer.a, inner), _compose(outer.b, inner))


def _indexing(layout, vec=None):
    if isinstance(layout, DigitLayout):
        return digit_indexing(layout)
    return fragment_indexing(layout, vec)





def _resolve(ctx, tiles, groups, fixed, derived, partners, scalars=frozenset(),
             constant_reads=frozenset(), broadcast=frozenset()):
    """Each group of tied fragments gets its layout: a fixed one (gemm), one derived from
    a resolved fragment (a reduction, a subset index), else the T.Parallel distribution
    (``scalars``, fragments used only at constant indices: every thread holds all; so
    does the destination of a reduction through shared memory read at a constant index,
    ``constant_reads``: ``S[bx] = s[0]`` after a row of 100; and a small group with a
    fragment a T.Parallel reads at an index none of its own, ``broadcast``)."""
    frags = [n for n, t in tiles.items() if t.kind == FRAGMENT]
    members: dict[str, list[str]] = {}
    for n in frags:
        members.setdefault(groups.find(n), []).append(n)
    chosen: dict[str, tuple] = {}        # group root -> (layout, vec, line, reason, name)

    def assign(root, layout, vec, line, reason, name):
        old = chosen.get(root)
        if old is not None:
            if not same_layout(old[0], layout):
                raise ctx.error(
                    f"Layout infer conflict: fragments {shown(old[4])} and {shown(name)} need "
                    f"different layouts: "
                    f"{old[3]} "
                    f"(line {old[2]}: {ctx.source_line(old[2])}) and {reason} (line {line}: "
                    f"{ctx.source_line(line)})", line)
            return False
        chosen[root] = (layout, vec, line, reason, name)
        return True

    def shown(name):
        if name.startswith("__tj_part"):     # the stand-in of a loop over part of one
            return f"(the T.Parallel at line {tiles[name].line})"
        if name.startswith("__tj_loop"):     # the stand-in of a loop_layout=
            return f"(the loop_layout of the T.Parallel at line {tiles[name].line})"
        return repr(name)

    for root, names in members.items():
        shapes = {tiles[n].shape for n in names}
        if len(shapes) > 1:
            raise ctx.error(f"fragments {', '.join(names)} are used together but have shapes "
                            f"{sorted(shapes)}", tiles[names[0]].line)
        for n in names:
            if n in fixed:
                frag, line, reason = fixed[n]
                assign(root, frag, None, line, reason, n)
    def derivable(src_layout, dims, keep, optional, line, dst=None, why="", src=None):
        """The derived layout, or None for a reduction that goes through shared memory
        (its source layout has no digit form with power-of-two thread groups)."""
        if keep == _RESHAPE:
            _, _, at, reason, _ = chosen[groups.find(src)]
            origin = f"{reason}, line {at}: {ctx.source_line(at)}"
            if dst.startswith("__tj_part_q"):
                return _divided(ctx, src_layout, tiles[dst].shape, line, why, origin)
            return _reshaped(ctx, src_layout, tiles[src], tiles[dst], line, origin)
        if keep in (_EXPAND, _RESTRICT):
            _, _, at, reason, _ = chosen[groups.find(src)]
            origin = f"{reason}, line {at}: {ctx.source_line(at)}"
            return _part_layout(ctx, src_layout, dims, keep, tiles[dst].shape, line,
                                dst if keep == _EXPAND else src, why, origin)
        if optional and _reduction_or_none(src_layout, dims, keep) is None:
            return None
        return _reduction(ctx, src_layout, dims, keep, line)[0]

    derived = [d for d in derived]
    targets = {groups.find(dst) for _, dst, *_ in derived}
    viewed_bases = {t.view_of for t in tiles.values() if t.kind == FRAGMENT and t.view_of}
    pending = [r for r in members if r not in chosen]
    dropped_edges = set()
    while pending:
        progress = False
        for n, (src, dst, dims, keep, line, why, optional) in enumerate(derived):
            rs, rd = groups.find(src), groups.find(dst)
            if rs in chosen and rd not in chosen and n not in dropped_edges:
                layout = derivable(chosen[rs][0], dims, keep, optional, line, dst, why, src)
                if layout is None:
                    dropped_edges.add(n)
                    targets = {groups.find(d[1]) for m, d in enumerate(derived)
                               if m not in dropped_edges}
                    continue
                assign(rd, layout, None, line, why, src if keep == _RESTRICT else dst)
                progress = True
        pending = [r for r in members if r not in chosen]
        if progress or not pending:
            continue
        # a loop over part of a fragment and that fragment derive from each other: the
        # loop's layout is chosen first (a T.Parallel distribution of its own shape)
        # else a loop's own fragment before the fragments it reads by a subset of its
        # indices (Mamba3's `PsiV[cs, r, p] = v[cs, p] * Psi[r, p]`: Psi follows PsiV's
        # distribution, each thread holding the Psi elements its PsiV elements read)
        roots = [r for r in pending if r not in targets] or [
            r for r in pending if any(k == _EXPAND and groups.find(s) == r
                                      for s, _, _, k, *_ in derived)][:1] or [
            r for r in pending if any(k is False and not o and dm and groups.find(s) == r
                                      and groups.find(d) in pending
                                      for s, d, dm, k, _, _, o in derived)][:1] \
            or pending[:1]
        for root in roots:
            names = members[root]
            dtypes = [tiles[n].dtype for n in names]
            dtypes += [d for n in names for d in partners.get(n, ())]
            needs = [(dims, keep, tiles[dst].shape) for src, dst, dims, keep, _, _, optional
                     in derived if groups.find(src) == root and not optional]

            def usable(layout, needs=needs):
                return all(_derived_or_none(layout, d, k, shape) is not None
                           for d, k, shape in needs)
            if all(n in scalars for n in names) and not needs:
                layout = parallel_fragment(tiles[names[0]].shape, 1, 1).replicated(ctx.threads)
                assign(root, layout, 1, tiles[names[0]].line,
                       "used at constant indices only: every thread holds it", names[0])
                continue
            wide = [n for n in names if n in broadcast]
            if wide and not needs and \
                    math.prod(tiles[names[0]].shape) <= GATHERED_FRAGMENT_MAX:
                # every thread runs each iteration of the loops over the group, on its own
                # copy (stores to memory by one copy: _one_copy_stores)
                layout = parallel_fragment(tiles[names[0]].shape, 1, 1).replicated(ctx.threads)
                assign(root, layout, 1, tiles[names[0]].line,
                       f"read at indices not a T.Parallel's own ({wide[0]!r}): every thread "
                       f"holds it", names[0])
                continue
            if not needs and any(n in constant_reads for n in names) and any(
                    groups.find(derived[m][1]) == root for m in dropped_edges):
                layout = parallel_fragment(tiles[names[0]].shape, 1, 1).replicated(ctx.threads)
                assign(root, layout, 1, tiles[names[0]].line,
                       "the destination of a reduction through shared memory, read at a "
                       "constant index: every thread holds it", names[0])
                continue
            layout, vec = _parallel_layout(tiles[names[0]].shape, dtypes, ctx.threads,
                                           usable if needs else None)
            if any(n.startswith("__tj_part") or tiles[n].view_of or n in viewed_bases
                   for n in names):
                # the fragments a loop over part of them derive their layouts from its
                # digit form, where threads beyond the elements hold replicas: the loop
                # runs in the same form, so that the replicas are written too (the
                # distribution's own form leaves those threads out); a fragment and its
                # views (T.reshape) number their slots alike in that form
                layout = _as_digits(layout) or layout
            assign(root, layout, vec, tiles[names[0]].line, "T.Parallel distribution", names[0])
        pending = [r for r in members if r not in chosen]
    for src, dst, dims, keep, line, why, optional in derived:   # derivations must agree
        rs, rd = groups.find(src), groups.find(dst)
        if optional and _reduction_or_none(chosen[rs][0], dims, keep) is None:
            continue                   # reduced through shared memory: any dst layout
        want = derivable(chosen[rs][0], dims, keep, False, line, dst, why, src)
        have = chosen[rd]
        if keep == _RESHAPE and not same_layout(want, have[0]):
            raise ctx.error(
                f"Layout infer conflict: fragment {dst!r} needs two different layouts: {why}, "
                f"which keeps each "
                f"element where {src!r} holds it ({chosen[rs][3]}, line {chosen[rs][2]}: "
                f"{ctx.source_line(chosen[rs][2])}), and {have[3]} (line {have[2]}: "
                f"{ctx.source_line(have[2])}); a view shares its fragment's registers, so "
                f"the two must agree", line)
        if keep is False and not optional and isinstance(want, DigitLayout) \
                and not isinstance(have[0], DigitLayout) and same_layout(want, have[0]) \
                and _holders(have[0]) < _holders(want):
            # a fragment read by a subset of a loop's indices, its layout chosen as a
            # distribution of its own before the loop's: the same placement, but the
            # distribution's own form leaves the threads beyond its elements empty,
            # while the loop's threads there read its replicas; its digit form holds them
            chosen[rd] = (want,) + have[1:]
            continue
        if not same_layout(want, have[0]):
            conflict = _DerivationConflict([(have[4], have[2]), (
                src if keep == _RESTRICT else dst, line)])
            named = src if keep == _RESTRICT else dst
            tied = [n for n in members.get(rd, ()) if n != named and not n.startswith("__tj")]
            through = (f"; {named!r} shares one layout with {', '.join(map(repr, tied))} "
                       f"(a T.Parallel or T.copy indexes them alike), so a constraint on "
                       f"either is on both" if tied else "")
            conflict.error = ctx.error(
                f"Layout infer conflict: fragment {named!r} needs two different layouts: "
                f"{why} (line {line}: "
                f"{ctx.source_line(line)}) and {have[3]} (line {have[2]}: "
                f"{ctx.source_line(have[2])}){through}", line)
            raise conflict
    for root, names in members.items():
        layout, vec, line, reason, _ = chosen[root]
        ix = _indexing(layout, vec)
        for n in names:
            tiles[n].layout, tiles[n].indexing = layout, ix
            tiles[n].layout_reason = f"{reason} (line {line})"


def _holders(layout) -> int:
    """How many of the block's threads hold elements of ``layout``: in a digit form all
    of them (those past its digits hold replicas); in a distribution's own form those
    its thread layout reaches, times its replicas."""
    if isinstance(layout, DigitLayout):
        return layout.threads
    if isinstance(layout, ParallelLayout):
        return min(layout.threads, -(-math.prod(layout.shape) // layout.vec))
    return layout.thread_layout.cosize * layout.replicate


def _is_atomic(node) -> bool:
    """An element atomic call (``tile_operands.py``'s form)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in set(ATOMICS.values())


def _has_valued_atomic(loop) -> bool:
    """Whether a loop's body uses the value an element atomic returns (anything but an
    atomic statement of its own)."""
    statements = {id(n.value) for n in syntax.walk(loop) if isinstance(n, ast.Expr)}
    return any(_is_atomic(n) and id(n) not in statements for n in syntax.walk(loop))


def _plan_reduction_scratch(ctx, tiles):
    """Reductions whose rows span warps exchange partial results through shared memory
    (warp groups x reduced elements, in the compute type). Each such reduction begins
    by writing its scratch and ends with a block barrier after its last read of it
    (``lowering/reductions.py``), so one after another they may share one scratch tile,
    ``__tj_red``, as large as the largest needs: two of MLA's row reductions no longer
    take 2 KiB each. A kernel with ``T.ws`` roles, whose roles may reduce at the same
    time, keeps a scratch per reduction. Reductions through shared memory (no shuffle
    pattern) share theirs too, one per source shape and compute type."""
    shared_scratch = not ctx.plan.role_threads
    largest = None          # (bytes, compute dtype, line) of the shared scratch
    memory_scratch: dict = {}   # (shape, compute dtype) -> a scratch through shared memory
    for k, (src, dst, dim, line) in enumerate(ctx.plan.reductions):
        if tiles[src].kind != FRAGMENT or tiles[dst].kind != FRAGMENT:
            continue
        keep = len(tiles[dst].shape) == len(tiles[src].shape)
        d = tiles[dst].dtype
        compute = compute_dtype(d)
        if _reduction_or_none(tiles[src].layout, (dim,), keep) is None:
            # no shuffle pattern: the source goes to shared memory and is reduced there,
            # between barriers, so reductions of one shape and type one after another
            # share the scratch (not with T.ws roles)
            shape = tuple(tiles[src].shape)
            name = memory_scratch.get((shape, compute.name)) if shared_scratch else None
            if name is None:
                name = f"__tj_redmem{k}"
                tiles[name] = Tile(name, SHARED, shape, compute, line,
                                   layout=row_major(shape),
                                   layout_reason="a reduction through shared memory")
                memory_scratch[(shape, compute.name)] = name
            ctx.plan.scratch[k] = name
            continue
        _, _, steps = _reduction(ctx, tiles[src].layout, (dim,), keep, line)
        red = steps[0]
        if not red.warp_digits and not idle_copies(
                red.source, tiles[src].indexing.valid is not None, ctx.plan.threads):
            continue
        size = math.prod(red.result.shape)
        if shared_scratch:
            nbytes = red.warp_groups * size * compute.itemsize
            if largest is None or nbytes > largest[0]:
                largest = (nbytes, compute, line)
            ctx.plan.scratch[k] = "__tj_red"
            continue
        name = f"__tj_red{k}"
        tiles[name] = Tile(name, SHARED, (red.warp_groups, size), compute, line,
                           layout=row_major((red.warp_groups, size)),
                           layout_reason="scratch of a cross-warp reduction")
        ctx.plan.scratch[k] = name
    if largest is not None:
        nbytes, compute, line = largest
        count = nbytes // compute.itemsize
        tiles["__tj_red"] = Tile("__tj_red", SHARED, (count,), compute, line,
                                 layout=row_major((count,)),
                                 layout_reason="scratch of the cross-warp reductions")
    for k, (src, dst, line) in enumerate(ctx.plan.scans):
        if FRAGMENT not in (tiles[src].kind, tiles[dst].kind):
            continue
        d = tiles[dst].dtype
        compute = compute_dtype(d)
        name = f"__tj_scan{k}"
        tiles[name] = Tile(name, SHARED, tiles[src].shape, compute, line,
                           layout=row_major(tiles[src].shape),
                           layout_reason="scratch of a T.cumsum/T.cummax over a fragment")
        ctx.plan.scan_scratch[k] = name

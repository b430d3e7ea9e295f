"""Fragments every thread holds whole (layout inference, ``layout_inference.py``):
small ones used only at indices every thread computes alike (TileLang's (1,)-shaped
running values, block masks), ones of any size only serial code indexes (TileLang's
floating fragments, ``_floating_fragments``), and small ones a ``T.Parallel`` reads at
indices not its own (TileLang replicates them)."""
from __future__ import annotations

import ast
import math

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import REDUCE
from tilejit.ir.plan import FRAGMENT, SCALAR_FRAGMENT_MAX as _SCALAR_FRAGMENT_MAX
from tilejit.passes.fragment_subscripts import (constant_index, dropped_positions,
                                                index_names, is_parallel, loop_names,
                                                partial_positions)
from tilejit.passes.static_eval import NotStatic


def _small_fragments(ctx) -> set:
    """The fragments of at most ``SCALAR_FRAGMENT_MAX`` elements."""
    return {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT
            and len(t.shape) >= 1 and math.prod(t.shape) <= _SCALAR_FRAGMENT_MAX}


def _floating_fragments(fdef, ctx) -> set:
    """Fragments of any size only ever indexed element by element outside T.Parallel
    loops (serial code: ``P[i, j] = ...`` in ``T.serial`` loops), never a tile
    operation's operand: TileLang's "floating" fragments, which it lays out fully
    replicated, every thread holding the whole of one as its own array (larger ones in
    local memory)."""
    in_parallel = _inside_parallel_loops(fdef, ctx)
    frags = {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT and len(t.shape) >= 1}
    elements = set()
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in frags:
            if id(node) in in_parallel or any(isinstance(i, ast.Slice)
                                              for i in syntax.walk(node.slice)):
                frags.discard(node.value.id)
            else:
                elements.add(id(node.value))
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and node.id in frags and id(node) not in elements \
                and not isinstance(node.ctx, ast.Store):
            frags.discard(node.id)
    # (one never indexed, allocated and left unused, is no serial code's)
    indexed = {node.value.id for node in syntax.walk(fdef) if isinstance(node, ast.Subscript)
               and id(node.value) in elements}
    return frags & indexed


def _inside_parallel_loops(fdef, ctx) -> set:
    """The ids of the nodes inside T.Parallel loops."""
    return {id(n) for loop in syntax.walk(fdef) if isinstance(loop, ast.For)
            and is_parallel(loop, ctx) for n in syntax.walk(loop)}


def scalar_fragments(fdef, ctx) -> set:
    """Small fragments used only element by element at indices every thread computes
    alike (``m[0] = -inf``, ``x = m[0] * 2``, a block mask's ``mask[k]`` in a serial
    loop; an index with a T.Parallel loop's variable is not one, and a store at a
    computed index is made outside T.Parallel loops), set by ``T.fill``/``T.clear`` or
    copied whole (``T.copy(Mask[bx, 0], mask)``) or reduced (when also indexed outside
    T.Parallel loops): TileLang gives each thread the whole of such a fragment, as a
    local array every thread computes alike."""
    frags = _small_fragments(ctx) | _floating_fragments(fdef, ctx)
    parallel_vars = {n.id for loop in syntax.walk(fdef) if isinstance(loop, ast.For)
                     and is_parallel(loop, ctx) for n in syntax.walk(loop.target)
                     if isinstance(n, ast.Name)}
    in_parallel = _inside_parallel_loops(fdef, ctx)
    allowed = set()               # ids of the Name nodes of allowed uses
    outside = set()               # indexed element by element outside T.Parallel loops
    reductions = []
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in frags and (constant_index(node) is not None or (
                    not {n.id for n in syntax.walk(node.slice) if isinstance(n, ast.Name)}
                    & parallel_vars and (isinstance(node.ctx, ast.Load)
                                         or id(node) not in in_parallel))):
            allowed.add(id(node.value))
            if id(node) not in in_parallel:
                outside.add(node.value.id)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) \
                and resolve_static(node.func, ctx.namespace) in (T.fill, T.clear):
            allowed.add(id(node.args[0]))
        elif isinstance(node, ast.Call) and resolve_static(node.func, ctx.namespace) is T.copy \
                and len(node.args) == 2:
            allowed.update(id(a) for a in node.args if isinstance(a, ast.Name))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == REDUCE:
            reductions.append(node)
    for node in reductions:
        # a reduction of a fragment also indexed element by element outside T.Parallel
        # loops (``tmp[0] = 1; T.reduce_sum(tmp, out)``): each thread reduces its own copy
        if isinstance(node.args[0], ast.Name) and node.args[0].id in outside:
            allowed.update(id(a) for a in node.args[:2] if isinstance(a, ast.Name))
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and node.id in frags and id(node) not in allowed \
                and not isinstance(node.ctx, ast.Store):
            frags.discard(node.id)
    return frags




def gathered_fragments(fdef, ctx, static) -> frozenset:
    """Small fragments a T.Parallel reads at indices that are not its own (``a[k, i]`` in
    a loop over ``(i, j)`` with k a serial loop's variable, ``A[i, j // 32]``), which no
    distribution over that loop can hold, and that no T.Parallel writes: as TileLang
    replicates them, every thread holds the whole fragment (set by ``T.copy``,
    ``T.fill``/``T.clear`` or stores outside T.Parallel loops) and reads any element.
    Only fragments the loop's own layout cannot follow are taken (the shape differs
    from the loop's extents), so a kernel that compiled before keeps its layouts."""
    tiles = ctx.plan.tiles
    small = {n for n, t in tiles.items() if t.kind == FRAGMENT and t.shape
             and math.prod(t.shape) <= GATHERED_FRAGMENT_MAX and not t.view_of}
    small -= set(ctx.plan.user_fragments)
    if not small:
        return frozenset()
    wanted, written = set(), set()
    for loop in syntax.walk(fdef):
        if not (isinstance(loop, ast.For) and is_parallel(loop, ctx)):
            continue
        loop_vars = loop_names(loop.target) or []
        try:
            extents = tuple(static.value(a) for a in loop.iter.args)
        except NotStatic:
            extents = None
        varying = set(loop_vars) | {n.id for n in syntax.walk(loop) if isinstance(n, ast.Name)
                                    and isinstance(n.ctx, ast.Store)}
        for sub in syntax.walk(loop):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                    and sub.value.id in small):
                continue
            name = sub.value.id
            if not isinstance(sub.ctx, ast.Load):
                written.add(name)
                continue
            # what _Collect makes of it: a use by all of the loop's indices (the shape
            # must then be the loop's), by some (a reduction's rows), or in part
            if constant_index(sub) is not None or \
                    dropped_positions(index_names(sub), loop_vars) or \
                    (loop_vars and partial_positions(sub, loop_vars, varying) is not None):
                continue
            if extents is not None and extents != tiles[name].shape and \
                    index_names(sub) != list(loop_vars):
                wanted.add(name)
    for node in syntax.walk(fdef):             # every other use: a whole copy, fill, or element
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in wanted and resolve_static(
                    node.func, ctx.namespace) not in (T.copy, T.fill, T.clear):
            written.add(node.args[0].id)
    return frozenset(wanted - written)


# elements a thread holds whole to read any of them: TileLang's issue 1374 reads a (16, 14)
# int32 fragment at [i, j // 32]; past the registers a thread has, check_registers warns
# of the spill (or refuses past its limit)
GATHERED_FRAGMENT_MAX = 256


def constant_read_fragments(fdef, ctx) -> frozenset:
    """Small fragments read at constant indices (``S[bx] = s[0]`` after a reduction into
    ``s``, ``x[j] - mx[0]`` in a T.Parallel; stored at one only outside T.Parallel
    loops): where such a fragment is the destination of a
    reduction that goes through shared memory (which may leave its result in any layout),
    every thread is given the whole of it (``layout_inference._resolve``)."""
    frags = _small_fragments(ctx)
    in_parallel = _inside_parallel_loops(fdef, ctx)
    return frozenset(
        node.value.id for node in syntax.walk(fdef)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
        and node.value.id in frags and constant_index(node) is not None
        and (id(node) not in in_parallel or isinstance(node.ctx, ast.Load)))

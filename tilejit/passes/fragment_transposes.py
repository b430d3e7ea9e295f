"""Pass: a ``T.Parallel`` that indexes a fragment with the loop's indices in another
order, as TileLang's GDN kernels transpose a fragment for a gemm or a reduction:

    for i, k in T.Parallel(S, K):  Q_t[k, i] = Q[i, k]            (a transposed write)
    for i, j in T.Parallel(M, N):  D[i, j] = F[j, i] * 2           (a transposed read)

An element and its transpose are held by different threads in any layout the loop could
take, so the values go through a row-major shared scratch tile, as a layout conversion
does (``layout_conversion.py``; the barrier pass orders the writes and the reads):

    a write:  the loop stores into scratch[i, k] instead, then
              for a, b in T.Parallel(K, S):  Q_t[a, b] = scratch[b, a]
    a read:   T.copy(F, scratch) before the loop, which reads scratch[j, i]

The fragments keep whatever layouts the rest of the kernel gives them. A loop that both
reads and writes one fragment in another order, or indexes it with a permutation and
also in order, is left to the layout pass (which names the subscript it cannot follow).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.addressing import row_major
from tilejit.ir.markers import LANGUAGE, TILE
from tilejit.ir.plan import FRAGMENT, SHARED, Tile
from tilejit.passes.element_loops import index, parallel_loop
from tilejit.passes.fragment_subscripts import index_names, loop_names
from tilejit.passes.static_eval import NotStatic, StaticEval

SCRATCH = "__tj_transpose"


def _permuted(sub, loop_vars, tiles):
    """The permutation (loop dim of each fragment dim) when ``sub`` indexes a fragment
    with all the loop's indices in another order, else None."""
    if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)):
        return None
    tile = tiles.get(sub.value.id)
    names = index_names(sub)
    if tile is None or tile.kind != FRAGMENT or len(names) != len(loop_vars) or \
            sorted(n or "" for n in names) != sorted(loop_vars) or names == loop_vars:
        return None
    return tuple(loop_vars.index(n) for n in names)


def _written_permutation(loop, loop_vars, tiles):
    """The permutation every fragment the loop writes is indexed with (all its uses in
    the loop so), when there is one and it is not the loop's order; else None."""
    stored = {sub.value.id for sub in syntax.walk(loop) if isinstance(sub, ast.Subscript)
              and isinstance(sub.ctx, ast.Store) and isinstance(sub.value, ast.Name)
              and sub.value.id in tiles and tiles[sub.value.id].kind == FRAGMENT}
    if not stored or not isinstance(loop.target, ast.Tuple) or \
            not all(isinstance(a, ast.expr) and not isinstance(a, ast.Starred)
                    for a in loop.iter.args) or loop.iter.keywords:
        return None
    perms = {_permuted(sub, loop_vars, tiles) for sub in syntax.walk(loop)
             if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
             and sub.value.id in stored}
    if len(perms) != 1 or None in perms:
        return None
    return next(iter(perms))


class _Transposes(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def visit_For(self, node):
        self.generic_visit(node)
        if not (isinstance(node.iter, ast.Call) and resolve_static(
                node.iter.func, self.ctx.namespace) is T.Parallel):
            return node
        loop_vars = loop_names(node.target)
        if loop_vars is None or len(loop_vars) < 2:
            return node
        try:
            extents = [int(self.static.value(a)) for a in node.iter.args]
        except (NotStatic, TypeError, ValueError):
            return node
        tiles = self.ctx.plan.tiles
        perm = _written_permutation(node, loop_vars, tiles)
        if perm is not None:
            # every fragment the loop writes is indexed in one other order (`acc_T[j, i]
            # += c[i, j]`, a swapped-operand GEMM's epilogue): the loop iterates in that
            # order, which T.Parallel's meaning allows; what it reads in the old order is
            # then a transposed read (below)
            elts = node.target.elts
            node.target.elts = [elts[p] for p in perm]
            node.iter.args = [node.iter.args[p] for p in perm]
            loop_vars = [loop_vars[p] for p in perm]
            extents = [extents[p] for p in perm]
        uses: dict = {}         # fragment -> {"store"/"load": permutation}, "plain"
        updated = {id(s.target) for s in syntax.walk(node) if isinstance(s, ast.AugAssign)}
        # a store the scratch can take: a statement of the loop body itself (under an
        # `if`, the elements it skips would be copied back from an unwritten scratch)
        direct = {id(t) for s in node.body if isinstance(s, ast.Assign) for t in s.targets}
        for sub in syntax.walk(node):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)):
                continue
            tile = tiles.get(sub.value.id)
            if tile is None or tile.kind != FRAGMENT:
                continue
            perm = _permuted(sub, loop_vars, tiles)
            store = isinstance(sub.ctx, ast.Store)
            kind = "plain" if perm is None or id(sub) in updated or (
                store and id(sub) not in direct) else ("store" if store else "load")
            uses.setdefault(sub.value.id, {}).setdefault(kind, set()).add(perm)
        before, after = [], []
        for name, kinds in uses.items():
            if "plain" in kinds or len(kinds) != 1:
                continue
            (kind, perms), = kinds.items()
            if len(perms) != 1:
                continue
            perm = next(iter(perms))
            frag = tiles[name]
            if [int(e) for e in frag.shape] != [extents[p] for p in perm]:
                continue                # not the loop's extents permuted: the layout pass says
            scratch = self._scratch(name, frag, extents if kind == "store" else
                                    [int(e) for e in frag.shape], node)
            before.append(_allocation(scratch))
            if kind == "store":
                _Rename(name, scratch, perm, loop_vars, store=True).visit(node)
                after.append(self._copy_out(name, scratch, frag, perm))
            else:
                before.append(ast.Expr(ast.Call(
                    ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy", ast.Load()),
                    [ast.Name(name, ast.Load()), ast.Name(scratch, ast.Load())], [])))
                _Rename(name, scratch, None, loop_vars, store=False).visit(node)
        if not before:
            return node
        return [ast.copy_location(s, node) for s in before] + [node] + \
            [ast.copy_location(s, node) for s in after]

    def _scratch(self, name, frag, shape, node):
        scratch = f"{SCRATCH}{self.ctx.number('transpose')}"
        self.ctx.plan.tiles[scratch] = Tile(
            scratch, SHARED, tuple(shape), frag.dtype, node.lineno,
            layout=row_major(tuple(shape)),
            layout_reason=f"transposes fragment {name!r} (the T.Parallel at line "
                          f"{node.lineno})")
        return scratch

    def _copy_out(self, name, scratch, frag, perm):
        """``for u in T.Parallel(*frag.shape): frag[u] = scratch[u in the loop's order]``."""
        seq = self.ctx.number("transpose_out")
        names = [f"__tj_tr{seq}_{d}" for d in range(len(perm))]
        at = [None] * len(perm)
        for k, p in enumerate(perm):
            at[p] = ast.Name(names[k], ast.Load())
        store = ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), index(
            [ast.Name(n, ast.Load()) for n in names]), ast.Store())],
            ast.Subscript(ast.Name(scratch, ast.Load()), index(at), ast.Load()))
        return parallel_loop(names, [int(e) for e in frag.shape], [store])


class _Rename(syntax.NodeTransformer):
    """A store ``F[perm]`` as ``scratch[loop order]``; a load ``F[perm]`` as
    ``scratch[perm]`` (the scratch holds F as it is)."""

    def __init__(self, name, scratch, perm, loop_vars, store):
        self.name, self.scratch, self.perm = name, scratch, perm
        self.loop_vars, self.store = loop_vars, store

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and node.value.id == self.name):
            return node
        if self.store:
            node.slice = index([ast.Name(v, ast.Load()) for v in self.loop_vars])
        node.value = ast.copy_location(ast.Name(self.scratch, ast.Load()), node.value)
        return node


def _allocation(scratch):
    return ast.Assign([ast.Name(scratch, ast.Store())],
                      ast.Call(ast.Name(TILE, ast.Load()), [ast.Constant(scratch)], []))


def transpose_fragments(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(t.kind == FRAGMENT for t in ctx.plan.tiles.values()):
        return fdef
    return syntax.fix_missing_locations(_Transposes(ctx, fdef).visit(fdef))

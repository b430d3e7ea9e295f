"""Pass: tile operations on a rectangular region of a fragment, as TileLang writes them
(and ``T.copy`` between a packed ``float4_e2m1fn`` or ``int4`` tensor and a whole shared tile or
fragment, the same element loop over the tile):
``T.clear(C_local[:block_M, :block_K])``, ``T.fill(F[0:16, :], v)``,
``T.copy(acc_o[:valid_block_H, :], O_shared)``, ``T.copy(A_shared[k, :], F[:, 0:32])``,
``T.copy(F[0:8, :], C[by * 8, 0])``, ``T.atomic_add(Out[0, 0], F[0:1, :])`` (issue 27).

A fragment's elements are spread over the block's threads by its layout, so an operation
on part of it is the loop over the whole fragment with the part selected; each thread
touches only the elements it holds that fall inside, and the fragment keeps its layout
whatever it is:

    T.copy(F[r0:r1, c0:c1], S)  →  for i, j in T.Parallel(*F.shape):
                                       if r0 <= i < r1 and c0 <= j < c1:
                                           S[i - r0, j - c0] = F[i, j]
    T.fill(F[r0:r1, :], v)      →  for i, j in T.Parallel(*F.shape):
                                       if r0 <= i < r1:
                                           F[i, j] = v

(``T.clear`` is the fill with 0; ``T.copy(X, F[...])`` the other way), which the layout
pass maps onto the fragment's layout as any loop over it. A pinned dimension (``F[k, :]``)
is one value of its index. The other operand of a copy is a shared tile or a tensor
parameter, whole or a region of it (its starts may move at run time); its elements pair
with the fragment region's as ``T.copy`` pairs them (dimensions of extent 1 set aside, a
region given by its corner takes the fragment region's extents in its last dimensions).
A tensor's elements outside the tensor are never written and read as 0, as any tile copy
clips at a tensor's edges. A region that is the whole fragment is the fragment.

The fragment region's bounds must be compile-time values inside the fragment; a region of
a fragment in any other form is a ``CompileError`` here (before the simulator runs, so
both targets refuse it alike). ``T.gemm`` takes its accumulator whole
(``frontend/gemm_operands.py``).
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import ATOMICS, CAST
from tilejit.ir.plan import FRAGMENT, SHARED
from tilejit.passes.element_loops import copy_operands, index, is_region, parallel_loop
from tilejit.passes.packed_tensors import moved_whole
from tilejit.passes.static_eval import NotStatic, StaticEval


def _name(node):
    return node.args[0].id if is_region(node) else node.id if isinstance(node, ast.Name) \
        else None


def _source(region) -> str:
    """A region as the kernel wrote it: ``F[0:n, :]``."""
    def bound(e):
        return "" if isinstance(e, ast.Constant) and e.value in (None, 0) else ast.unparse(e)
    return ast.unparse(region.args[0]) + "[" + ", ".join(
        ast.unparse(s) if k == "p" else f"{bound(s)}:{bound(e) if e.value is not None else ''}"
        if isinstance(e, ast.Constant) else f"{bound(s)}:{ast.unparse(e)}"
        for k, s, e in zip(region.args[1].value, region.args[2].elts, region.args[3].elts)) + "]"


def _add(a: ast.expr, b: ast.expr) -> ast.expr:
    if isinstance(b, ast.Constant) and b.value == 0:
        return a
    if isinstance(a, ast.Constant) and a.value == 0:
        return b
    return ast.BinOp(a, ast.Add(), b)


class _FragmentRegions(syntax.NodeTransformer):
    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    def _fragment_region(self, node):
        """The fragment a region operand slices, or None."""
        if not is_region(node):
            return None
        tile = self.ctx.plan.tiles.get(node.args[0].id)
        return tile if tile is not None and tile.kind == FRAGMENT else None

    def _bounds(self, region, fragment, stmt):
        """[(kind, start, stop) per dimension of the fragment] of a region of it."""
        kinds = region.args[1].value
        shape = tuple(int(e) for e in fragment.shape)
        text = _source(region)
        if len(kinds) != len(shape):
            raise self.ctx.error(f"`{text}`: fragment {fragment.name!r} of shape {shape} is "
                                 f"indexed with {len(kinds)} indices", stmt)
        try:
            starts = self.static.value(region.args[2])
            ends = self.static.value(region.args[3])
        except NotStatic:
            raise self.ctx.error(
                f"`{text}`: a region of fragment {fragment.name!r} needs bounds known at "
                f"compile time (literals, T.constexpr parameters, shapes); a region that "
                f"moves at run time is not supported (loop over the fragment with "
                f"T.Parallel and select the elements)", stmt) from None
        bounds = []
        for d, (kind, n) in enumerate(zip(kinds, shape)):
            start = 0 if starts[d] is None else int(starts[d])
            stop = start + 1 if kind == "p" else n if ends[d] is None else int(ends[d])
            if not 0 <= start < stop <= n:
                raise self.ctx.error(f"`{text}`: the region is outside fragment "
                                     f"{fragment.name!r} of shape {shape} (dimension {d}: "
                                     f"{start}:{stop})", stmt)
            bounds.append((kind, start, stop))
        return bounds

    @staticmethod
    def _whole(bounds, fragment):
        return all(k == "s" and a == 0 and b == int(n)
                   for (k, a, b), n in zip(bounds, fragment.shape))

    def _other(self, node, frag_ext, stmt):
        """(name, kind, [start expr per dim], [ranged dims], extents per ranged dim,
        tensor dtype or None) of a copy's other operand."""
        name = _name(node)
        tile = self.ctx.plan.tiles.get(name) if name else None
        tensor = self.ctx.params.get(name) if name else None
        if tile is not None and tile.kind != SHARED or tile is None and tensor is None:
            what = f"a {tile.kind} tile" if tile is not None else f"`{ast.unparse(node)}`"
            raise self.ctx.error(f"T.copy between a region of a fragment and {what} is not "
                                 f"supported: the other operand must be a shared tile or a "
                                 f"tensor, whole or a region of it", stmt)
        if tile is not None:
            shape = [int(e) for e in tile.shape]
        else:
            shape = list(tensor.static_shape or [None] * tensor.ndim)
        if not is_region(node):
            if None in shape:
                raise self.ctx.error(f"T.copy with a region of a fragment: tensor {name!r} "
                                     f"has a shape not known at compile time; give its "
                                     f"region (`{name}[r0:r1, c0:c1]`)", stmt)
            return (name, tile, [ast.Constant(0)] * len(shape), list(range(len(shape))),
                    shape, tensor)
        kinds = node.args[1].value
        starts = list(node.args[2].elts)
        ends = list(node.args[3].elts)
        ranged = [d for d, k in enumerate(kinds) if k == "s"]
        extents = []
        for d in ranged:
            try:
                a = self.static.value(starts[d])
                b = self.static.value(ends[d])
                if b is None and shape[d] is not None and tile is not None:
                    b = shape[d]
                extents.append(int(b) - int(a) if b is not None else None)
            except (NotStatic, TypeError, ValueError):
                e = int(node.args[4].value.split(",")[d] or 0)
                extents.append(e or None)
        if not ranged:                      # a corner: the last dims, from there on
            if len(frag_ext) > len(kinds):
                raise self.ctx.error(f"T.copy: a {len(kinds)}-d region cannot hold a "
                                     f"{tuple(frag_ext)} region of a fragment", stmt)
            ranged = list(range(len(kinds) - len(frag_ext), len(kinds)))
            extents = list(frag_ext)
        elif None in extents:
            squeezed = [e for e in frag_ext if e != 1] if len(frag_ext) != len(ranged) \
                else list(frag_ext)
            if len(squeezed) != len(ranged):
                raise self.ctx.error(f"T.copy: the region `{ast.unparse(node)}` has "
                                     f"{len(ranged)} sliced dimension(s), the fragment "
                                     f"region's shape is {tuple(frag_ext)}", stmt)
            extents = squeezed
        return name, tile, starts, ranged, extents, tensor

    def _loop(self, fragment, bounds, body_of):
        """The loop over the whole fragment, the region selected; ``body_of(names)`` is
        the region's element statement."""
        shape = [int(e) for e in fragment.shape]
        seq = self.ctx.number("fragment_region")
        names = [f"__tj_fr{seq}_{d}" for d in range(len(shape))]
        tests = [ast.Compare(ast.Constant(a), [ast.LtE(), ast.Lt()],
                             [ast.Name(n, ast.Load()), ast.Constant(b)])
                 if b - a > 1 else
                 ast.Compare(ast.Name(n, ast.Load()), [ast.Eq()], [ast.Constant(a)])
                 for n, (_, a, b), e in zip(names, bounds, shape) if (a, b) != (0, e)]
        body = body_of(names)
        if tests:
            body = [ast.If(ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0],
                           body, [])]
        return parallel_loop(names, shape, body)

    @staticmethod
    def _element(name, names, ctx):
        return ast.Subscript(ast.Name(name, ast.Load()),
                             index([ast.Name(n, ast.Load()) for n in names]
                                   if names and isinstance(names[0], str) else names), ctx)

    def _fill(self, stmt, region, value):
        fragment = self._fragment_region(region)
        bounds = self._bounds(region, fragment, stmt)
        if self._whole(bounds, fragment):
            return None
        return self._loop(fragment, bounds, lambda names: [ast.Assign(
            [self._element(fragment.name, names, ast.Store())], copy.deepcopy(value))])

    def _copy(self, stmt, region, other, to_fragment):
        fragment = self._fragment_region(region)
        bounds = self._bounds(region, fragment, stmt)
        if self._whole(bounds, fragment):
            return None
        return self._paired(stmt, fragment, bounds, other, to_fragment)

    def _packed(self, node):
        """The packed tensor (float4_e2m1fn, int4) an operand names, or None."""
        name = _name(node) if isinstance(node, ast.Name) or is_region(node) else None
        ty = self.ctx.params.get(name) if name else None
        return name if ty is not None and ty.dtype.packed > 1 else None

    def _moved_whole(self, src, dst) -> bool:
        """Whether a copy between a packed tensor and a tile is the copy lowering's."""
        packed = self._packed(src) or self._packed(dst)
        return moved_whole(self.ctx.params[packed].dtype,
                           self._tile_of(dst if self._packed(src) else src))

    def _tile_of(self, node):
        name = node.id if isinstance(node, ast.Name) else None
        return self.ctx.plan.tiles.get(name) if name else None

    def _packed_copy(self, stmt, src, dst):
        """``T.copy`` between a packed tensor (whole or a region) and a whole shared tile
        or fragment: the loop over the tile, element by element (the tile's layout
        as any loop over it; the tensor's edges clip)."""
        to_tile = self._packed(src) is not None
        tile_node = dst if to_tile else src
        tile = self._tile_of(tile_node)
        if tile is None or tile.kind not in (SHARED, FRAGMENT):
            packed = self._packed(src) or self._packed(dst)
            raise self.ctx.error(
                f"T.copy of {packed}, {self.ctx.params[packed].dtype.with_article} tensor (two "
                f"elements a byte), with `{ast.unparse(tile_node)}`: it is copied element "
                f"by element to or from a whole shared tile or fragment only (not "
                f"supported otherwise)", stmt)
        bounds = [("s", 0, int(n)) for n in tile.shape]
        return self._paired(stmt, tile, bounds, src if to_tile else dst, to_tile)

    def _paired(self, stmt, fragment, bounds, other, to_fragment, update=None):
        """The loop copying ``fragment``'s region ``bounds`` to or from ``other``;
        ``update(target, value)``: the statement that puts a fragment element into
        ``other``'s in place of the store (an atomic's)."""
        ranged_f = [(d, a, b) for d, (k, a, b) in enumerate(bounds) if k == "s"]
        frag_ext = [b - a for _, a, b in ranged_f]
        name, tile, starts, ranged, extents, tensor = self._other(other, frag_ext, stmt)
        if [e for e in frag_ext if e != 1] != [e for e in extents if e != 1]:
            raise self.ctx.error(f"T.copy: the fragment region's extent {tuple(frag_ext)} "
                                 f"and the other operand's {tuple(extents)} differ", stmt)
        f_pos = [d for (d, _, _), e in zip(ranged_f, frag_ext) if e != 1]
        f_start = {d: a for d, a, _ in ranged_f}
        o_pos = iter([d for d, e in zip(ranged, extents) if e != 1])
        pairs = {next(o_pos): d for d in f_pos}

        def body(names):
            idx = [copy.deepcopy(s) for s in starts]
            for od, fd in pairs.items():
                off = ast.BinOp(ast.Name(names[fd], ast.Load()), ast.Sub(),
                                ast.Constant(f_start[fd])) if f_start[fd] else \
                    ast.Name(names[fd], ast.Load())
                idx[od] = _add(idx[od], off)
            f_elem = self._element(fragment.name, names, ast.Load())
            o_elem = self._element(name, idx, ast.Load())
            inside = None
            if tensor is not None:      # a tensor's edges clip the copy
                tests = [ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()], [
                    copy.deepcopy(i), ast.Subscript(ast.Attribute(
                        ast.Name(name, ast.Load()), "shape", ast.Load()),
                        ast.Constant(d), ast.Load())]) for d, i in enumerate(idx)]
                inside = ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0]
            if to_fragment:
                f_elem.ctx = ast.Store()
                if inside is not None:
                    zero = ast.Call(ast.Name(CAST, ast.Load()),
                                    [ast.Constant(0), ast.Constant(tensor.dtype.name)], [])
                    o_elem = ast.IfExp(inside, o_elem, zero)
                return [ast.Assign([f_elem], o_elem)]
            if update is not None:
                store = update(o_elem, f_elem)
            else:
                o_elem.ctx = ast.Store()
                store = ast.Assign([o_elem], f_elem)
            return [ast.If(inside, [store], [])] if inside is not None else [store]

        return self._loop(fragment, bounds, body)

    def visit_Expr(self, node):
        call = node.value
        if not isinstance(call, ast.Call):
            return node
        fn = resolve_static(call.func, self.ctx.namespace)
        if fn in ATOMICS and len(call.args) == 4 and self._fragment_region(call.args[1]):
            return ast.copy_location(self._atomic(node, call, fn), node)
        if call.keywords:
            return node
        out = None
        if fn is T.clear and len(call.args) == 1 and self._fragment_region(call.args[0]):
            out = self._fill(node, call.args[0], ast.Constant(0))
            whole = 0
        elif fn is T.fill and len(call.args) == 2 and self._fragment_region(call.args[0]):
            out = self._fill(node, call.args[0], call.args[1])
            whole = 0
        elif copy_operands(node, self.ctx.namespace) is not None:
            src, dst = call.args
            if self._packed(src) or self._packed(dst):
                if self._moved_whole(src, dst):
                    return node
                return ast.copy_location(self._packed_copy(node, src, dst), node)
            if self._fragment_region(src) and not (
                    self._fragment_region(dst) or self._tile_is(dst, FRAGMENT)):
                out, whole = self._copy(node, src, dst, False), 0
            elif self._fragment_region(dst) and not self._tile_is(src, FRAGMENT):
                out, whole = self._copy(node, dst, src, True), 1
            elif self._fragment_region(src) and self._tile_is(dst, FRAGMENT):
                return ast.copy_location(self._rows(node, src, dst.id, False), node)
            elif self._fragment_region(dst) and self._tile_is(src, FRAGMENT):
                return ast.copy_location(self._rows(node, dst, src.id, True), node)
            elif self._fragment_region(src) or self._fragment_region(dst):
                raise self.ctx.error(
                    "T.copy between a region of a fragment and a fragment is not supported: "
                    "copy whole fragments, or loop over them with T.Parallel", node)
            else:
                return node
        else:
            return node
        if out is None:             # the whole fragment: the operation as written on it
            call.args[whole] = ast.copy_location(
                ast.Name(call.args[whole].args[0].id, ast.Load()), call.args[whole])
            return node
        return ast.copy_location(out, node)

    def _atomic(self, stmt, call, fn):
        """``T.atomic_add(X[...], F[r0:r1, ...])`` (also max and min), in its region form
        ``(dst, value, memory_order, return_prev)`` (``frontend/tile_operands.py``): each
        of the fragment region's elements added atomically into the tensor's or shared
        tile's, paired as ``T.copy`` pairs them (a tensor region given by its corner takes
        the fragment region's extents), each by the element atomic in the order given."""
        dst, region, order, prev = call.args
        fragment = self._fragment_region(region)
        if self._fragment_region(dst) or self._tile_is(dst, FRAGMENT):
            raise self.ctx.error(f"T.{fn.__name__} into a fragment is not supported (each of "
                                 f"a fragment's elements is one thread's: add into it in a "
                                 f"T.Parallel loop)", stmt)
        if not (isinstance(prev, ast.Constant) and prev.value is False):
            raise self.ctx.error(f"T.{fn.__name__} of a fragment region: return_prev=True "
                                 f"is for one element", stmt)
        bounds = self._bounds(region, fragment, stmt)

        def update(target, value):
            return ast.Expr(ast.Call(ast.Name(ATOMICS[fn], ast.Load()), [
                target.value, ast.Tuple(list(target.slice.elts) if isinstance(
                    target.slice, ast.Tuple) else [target.slice], ast.Load()),
                value, ast.Constant(False), ast.Constant(True), copy.deepcopy(order)], []))
        return self._paired(stmt, fragment, bounds, dst, False, update)

    def _rows(self, stmt, region, other, to_region):
        """``T.copy(F[k, :], G)`` (or the reverse) with G a whole fragment: fixed indices
        (which may move at run time, a pipelined loop's ``k``) and whole dimensions,
        those G's shape in order: ``for i in T.Parallel(*G.shape): G[i] = F[k, i]``, the
        loop over part of F that layout inference already follows (TileLang's
        flash-decoding combine). Any other region is not supported."""
        fragment = self._fragment_region(region)
        kinds = region.args[1].value
        starts, ends = region.args[2].elts, region.args[3].elts
        g_shape = [int(e) for e in self.ctx.plan.tiles[other].shape]
        whole = []
        for d, (kind, start, end) in enumerate(zip(kinds, starts, ends)):
            if kind == "s":
                try:
                    a = self.static.value(start)
                    b = self.static.value(end)
                except NotStatic:
                    a = b = -1
                if (a or 0) != 0 or b not in (None, int(fragment.shape[d])):
                    raise self.ctx.error(
                        f"T.copy between `{_source(region)}` and fragment {other!r}: the "
                        f"region's sliced dimensions must be whole (a fixed index and whole "
                        f"dimensions, as `F[k, :]`); copy whole fragments, or loop over "
                        f"them with T.Parallel", stmt)
                whole.append(int(fragment.shape[d]))
        if [e for e in whole if e != 1] != [e for e in g_shape if e != 1] or \
                len(whole) != len(g_shape):
            raise self.ctx.error(f"T.copy: `{_source(region)}` has extents {tuple(whole)}, "
                                 f"fragment {other!r} {tuple(g_shape)}", stmt)
        seq = self.ctx.number("fragment_rows")
        names = [f"__tj_frr{seq}_{d}" for d in range(len(g_shape))]
        it = iter(names)
        f_idx = [copy.deepcopy(s) if k == "p" else ast.Name(next(it), ast.Load())
                 for k, s in zip(kinds, starts)]
        f_elem = self._element(fragment.name, f_idx, ast.Load())
        g_elem = self._element(other, names, ast.Load())
        target, value = (f_elem, g_elem) if to_region else (g_elem, f_elem)
        target.ctx = ast.Store()
        return parallel_loop(names, g_shape, [ast.Assign([target], value)])

    def _tile_is(self, node, kind):
        name = _name(node)
        tile = self.ctx.plan.tiles.get(name) if name else None
        return tile is not None and tile.kind == kind


def expand_fragment_region_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    return syntax.fix_missing_locations(_FragmentRegions(ctx, fdef).visit(fdef))

"""Pass: ``T.annotate_layout({G: T.Layout(G.shape, fn)})`` on a global tensor ``G``, as
TileLang's FlashAttention backward lays out its float32 ``dQ`` accumulator so that the
atomics of one MMA fragment land side by side (``make_dq_layout``), and its post-process
kernel reads it back with the same annotation.

The annotation says where each element of ``G`` lives in the tensor's memory: element
``G[i0, .., in]`` is stored at flat position ``fn(i0, .., in)`` taken row-major over the
layout's output shape. The host sees that order; every kernel that annotates ``G`` with
the same layout sees the logical one. So every access of ``G`` in the kernel goes
through the function, on a flat view of the tensor:

    G[i, j]                        →  G_flat[<fn(i, j), linearized>]
    __tj_atomic_add(G, (i, j), v)  →  __tj_atomic_add(G_flat, (<...>,), v)
    T.copy(G[r0:r1, c], X)         →  for a, b in T.Parallel(r1 - r0, ...):   (element
    T.atomic_add(G[r0:r1, :], F)        loops over the region, clipped at G's and the
                                         other tensor's edges as any tile copy is)

The element loops are written over logical indices first, so the tensor's edges are
tested on the logical index (``passes/safe_memory.py`` has already guarded the kernel's
own element accesses the same way); only then does the flat index replace it, so an index
past an edge can never reach another element's storage. The layout must be a bijection
of the tensor's elements (checked over the whole compile-time shape, as for tiles); the
tensor must be contiguous (the runtime checks it at the call, as for ``T.reshape``). The
simulator follows the same definition (``sim/semantics.annotate_layout``: the launch
works on the elements gathered in logical order, scattered back at its end).
"""
from __future__ import annotations

import ast
import copy
import math

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import ATOMICS, CAST, LANGUAGE
from tilejit.language.fragment_layout import Fragment as UserFragment
from tilejit.language.layout import Layout as UserLayout
from tilejit.language.layout import LayoutError, evaluate_user_function
from tilejit.passes.element_loops import copy_operands, index, is_region, parallel_loop
from tilejit.passes.static_eval import NotStatic, StaticEval
from tilejit.passes.user_layouts import AnnotationScope, annotation_value

_ELEMENT_ATOMICS = frozenset(ATOMICS.values())
_REGION_ATOMICS = {fn: ATOMICS[fn] for fn in (T.atomic_add, T.atomic_max, T.atomic_min)}


class GlobalBuffer:
    """What a tensor parameter's name means while its annotation is evaluated."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    def __repr__(self):
        return f"<tensor {self.name}: {self.dtype}{list(self.shape)}>"


class _Index:
    """An index expression under construction: ``fn`` called on these builds its AST."""

    def __init__(self, node):
        self.node = node

    @staticmethod
    def _of(x):
        if isinstance(x, _Index):
            return copy.deepcopy(x.node)
        if isinstance(x, int) and not isinstance(x, bool):
            return ast.Constant(x)
        raise TypeError(f"an index expression takes integers, got {x!r}")

    def _bin(self, op, other, flip=False):
        a, b = self._of(self), self._of(other)
        return _Index(ast.BinOp(b, op, a) if flip else ast.BinOp(a, op, b))

    def __add__(self, o): return self._bin(ast.Add(), o)
    def __radd__(self, o): return self._bin(ast.Add(), o, True)
    def __sub__(self, o): return self._bin(ast.Sub(), o)
    def __rsub__(self, o): return self._bin(ast.Sub(), o, True)
    def __mul__(self, o): return self._bin(ast.Mult(), o)
    def __rmul__(self, o): return self._bin(ast.Mult(), o, True)
    def __floordiv__(self, o): return self._bin(ast.FloorDiv(), o)
    def __rfloordiv__(self, o): return self._bin(ast.FloorDiv(), o, True)
    def __mod__(self, o): return self._bin(ast.Mod(), o)
    def __rmod__(self, o): return self._bin(ast.Mod(), o, True)
    def __neg__(self): return _Index(ast.UnaryOp(ast.USub(), self._of(self)))


class _Annotated:
    """A tensor parameter laid out by an annotation: its flat view's name and the flat
    index of logical indices."""

    def __init__(self, name, layout, shape, out_shape, flat_name, line):
        self.name, self.layout, self.shape, self.flat_name = name, layout, shape, flat_name
        self.line = line
        self.strides = [math.prod(out_shape[k + 1:]) for k in range(len(out_shape))]

    def flat(self, indices, error):
        try:
            outs = self.layout.forward(*(_Index(copy.deepcopy(i)) for i in indices))
            terms = [_Index._of(o) for o in outs]
        except (TypeError, ArithmeticError) as e:
            raise error(f"T.annotate_layout of tensor {self.name!r} (line {self.line}): its "
                        f"forward function must compute each physical index from the "
                        f"logical ones with + - * // %: {e}") from None
        total = None
        for term, stride in zip(terms, self.strides):
            if isinstance(term, ast.Constant) and term.value == 0:
                continue
            if stride != 1:
                term = ast.BinOp(term, ast.Mult(), ast.Constant(stride))
            total = term if total is None else ast.BinOp(total, ast.Add(), term)
        return total if total is not None else ast.Constant(0)


def _annotations(fdef, namespace):
    return [s for s in syntax.walk(fdef) if isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Call) and resolve_static(s.value.func, namespace) is T.annotate_layout
        and len(s.value.args) == 1 and isinstance(s.value.args[0], ast.Dict)]


class _Rewrite(syntax.NodeTransformer):
    def __init__(self, ctx, fdef, annotated: dict):
        self.ctx = ctx
        self.annotated = annotated
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)

    # -- the region forms: element loops over logical indices --------------------------

    def _operand(self, node, stmt):
        """(name, starts, [(dim, extent)] ranged, tile or None, tensor type or None)."""
        name = node.args[0].id if is_region(node) else node.id if isinstance(
            node, ast.Name) else None
        tile = self.ctx.plan.tiles.get(name) if name else None
        tensor = self.ctx.params.get(name) if name else None
        if tile is None and tensor is None:
            raise self.ctx.error(f"`{ast.unparse(node)}`: expected a tile or a tensor beside "
                                 f"a tensor laid out by T.annotate_layout", stmt)
        shape = list(tile.shape) if tile is not None else [
            self.ctx.namespace.get(shape_constant_name(name, d)) for d in range(tensor.ndim)]
        if not is_region(node):     # a dimension known at run time: the tensor's own
            return name, [ast.Constant(0)] * len(shape), list(enumerate(
                _shape_of(name, d) if e is None else int(e)
                for d, e in enumerate(shape))), tile, tensor
        kinds, starts, ends = node.args[1].value, node.args[2].elts, node.args[3].elts
        known = node.args[4].value.split(",")
        ranged = []
        for d, kind in enumerate(kinds):
            if kind != "s":
                continue
            extent = int(known[d] or 0)
            if not extent:
                try:
                    a = self.static.value(starts[d])
                    b = self.static.value(ends[d])
                    extent = int(shape[d] if b is None else b) - int(a)
                except (NotStatic, TypeError, ValueError):
                    extent = 0
            if extent <= 0 and (tensor is not None or tile is not None):
                # known at run time: (its end, or the tensor's or tile's edge) - its start
                end = ends[d]
                if isinstance(end, ast.Constant) and end.value is None:
                    end = _shape_of(name, d) if tile is None else ast.Constant(shape[d])
                else:
                    end = copy.deepcopy(end)
                extent = ast.BinOp(end, ast.Sub(), copy.deepcopy(starts[d]))
            ranged.append((d, extent if not isinstance(extent, int) or extent > 0 else None))
        return name, list(starts), ranged, tile, tensor

    def _resolve(self, op, other, stmt):
        """``op`` with the extents it does not know taken from ``other``'s, in order."""
        name, starts, ranged, tile, tensor = op
        if all(e is not None for _, e in ranged):
            return op
        known = [e for _, e in other[2]]
        if len(known) != len(ranged):
            known = [e for e in known if e != 1]
        if len(known) != len(ranged) or None in known:
            raise self.ctx.error(f"`{ast.unparse(stmt)}`: the extents of the region of "
                                 f"{name!r} must be known at compile time", stmt)
        return name, starts, [(d, e) for (d, _), e in zip(ranged, known)], tile, tensor

    def _loop(self, stmt, a, b, body_of, copy_of=False):
        """The element loop pairing operands ``a`` and ``b`` (as ``_operand`` gives them);
        ``body_of(a_elem, b_elem, a_inside, b_inside)`` the statements of one element,
        ``x_inside`` the test that the element is inside operand x's tensor (None for a
        tile, or where every index is a constant). ``copy_of``: ``a`` is a T.copy's source
        and ``b`` its destination, whose extents may differ as TileLang's copy allows
        (ir/regions.py): the loop runs over the tile's, or the source's between two
        tensors, never past a destination tile."""
        a, b = self._resolve(a, b, stmt), self._resolve(b, a, stmt)
        a_ext = [e for _, e in a[2] if e != 1]
        b_ext = [e for _, e in b[2] if e != 1]
        static = len(a_ext) == len(b_ext) and all(
            isinstance(x, int) and isinstance(y, int) for x, y in zip(a_ext, b_ext))
        if copy_of and static and a_ext != b_ext:
            if b[3] is not None and a[3] is None:       # a tile destination: its extents
                if all(y >= x for x, y in zip(a_ext, b_ext)):
                    a_ext = b_ext
            elif b[3] is None:                          # else the source's
                b_ext = a_ext
        if len(a_ext) != len(b_ext) or any(
                isinstance(x, int) and isinstance(y, int) and x != y
                for x, y in zip(a_ext, b_ext)):
            raise self.ctx.error(f"`{ast.unparse(stmt)}`: the operands' extents "
                                 f"{_extents_text(a_ext)} and {_extents_text(b_ext)} differ",
                                 stmt)
        # an extent known at run time on one side takes the other's known one; on both,
        # the first operand's (the elements past either tensor's edge are tested below)
        a_ext = [y if not isinstance(x, int) and isinstance(y, int) else x
                 for x, y in zip(a_ext, b_ext)]
        seq = self.ctx.number("global_layout")
        names = [f"__tj_gl{seq}_{k}" for k in range(max(len(a_ext), 1))]

        def element(op):
            name, starts, ranged, tile, tensor = op
            tests = []
            idx = [copy.deepcopy(s) for s in starts]
            it = iter(names)
            for d, e in ranged:
                if e != 1:
                    var = ast.Name(next(it), ast.Load())
                    idx[d] = var if isinstance(idx[d], ast.Constant) and idx[d].value == 0 \
                        else ast.BinOp(idx[d], ast.Add(), var)
            if tensor is not None:
                for d, i in enumerate(idx):
                    if not isinstance(i, ast.Constant):
                        tests.append(ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()], [
                            copy.deepcopy(i), ast.Subscript(ast.Attribute(
                                ast.Name(name, ast.Load()), "shape", ast.Load()),
                                ast.Constant(d), ast.Load())]))
            inside = (ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0]) \
                if tests else None
            return ast.Subscript(ast.Name(name, ast.Load()), index(idx), ast.Load()), inside

        (a_elem, a_inside), (b_elem, b_inside) = element(a), element(b)
        return ast.copy_location(parallel_loop(names, a_ext or [1],
                                               body_of(a_elem, b_elem, a_inside, b_inside)),
                                 stmt)

    def _copy(self, stmt, src, dst):
        s, d = self._operand(src, stmt), self._operand(dst, stmt)

        def body(s_elem, d_elem, s_inside, d_inside):
            # an element outside the source reads 0 (as a tile copy pads), one outside
            # the destination is not stored
            d_elem.ctx = ast.Store()
            value = s_elem if s_inside is None else ast.IfExp(s_inside, s_elem, _zero(s))
            if s[4] is not None and d[4] is not None and s[4].dtype != d[4].dtype:
                # between the dtypes of two tensors the copy converts
                value = ast.Call(ast.Name(CAST, ast.Load()), [value, ast.Constant(
                    d[4].dtype.name)], [])
            store = [ast.Assign([d_elem], value)]
            return store if d_inside is None else [ast.If(d_inside, store, [])]
        return self._loop(stmt, s, d, body, copy_of=True)

    def _atomic(self, stmt, fn, call):
        dst, value = call.args[0], call.args[1]
        memory_order, return_prev = call.args[2], call.args[3]
        if not (isinstance(value, ast.Name) or is_region(value)):
            raise self.ctx.error(f"T.{fn.__name__} on a region of {ast.unparse(dst)}: the "
                                 f"value must be a tile or a region of one", stmt)
        if not (isinstance(return_prev, ast.Constant) and return_prev.value is False):
            raise self.ctx.error(f"T.{fn.__name__} on a region of {ast.unparse(dst)} cannot "
                                 f"return the previous values", stmt)
        marker = _REGION_ATOMICS[fn]

        def body(d_elem, v_elem, d_inside, v_inside):
            # a value outside its tensor is 0, combined in (as the simulator does)
            value = v_elem if v_inside is None else ast.IfExp(v_inside, v_elem, _zero(v))
            atom = ast.Expr(ast.Call(ast.Name(marker, ast.Load()), [
                d_elem.value, d_elem.slice if isinstance(d_elem.slice, ast.Tuple)
                else ast.Tuple([d_elem.slice], ast.Load()), value, ast.Constant(False),
                ast.Constant(True), copy.deepcopy(memory_order)], []))
            return [ast.If(d_inside, [atom], [])] if d_inside is not None else [atom]
        v = self._operand(value, stmt)
        return self._loop(stmt, self._operand(dst, stmt), v, body)

    def visit_Expr(self, node):
        call = node.value
        if not isinstance(call, ast.Call):
            return self.generic_visit(node)
        ops = copy_operands(node, self.ctx.namespace)
        if ops is not None and (any(self._whole_or_region(x) for x in ops)
                                or _tensor_copy(ops, self.ctx.params)
                                or self._run_time_prefix(ops, node)):
            return self.generic_visit(self._copy(node, *ops))
        if len(call.args) == 4 and self._whole_or_region(call.args[0]):
            fn = resolve_static(call.func, self.ctx.namespace)
            if fn in _REGION_ATOMICS:
                return self.generic_visit(self._atomic(node, fn, call))
        return self.generic_visit(node)

    def _run_time_prefix(self, ops, stmt) -> bool:
        """``T.copy(A[0:n], S[0:n])``: a tensor's region and a shared tile's whose
        extents are known at run time only (a copy of a run-time length, TileLang's
        varlen loads): the element loop over them (the tile planner needs the extents)."""
        if not _run_time_prefix_copy(ops, self.ctx):
            return False
        parsed = [self._operand(x, stmt) for x in ops]
        return any(not isinstance(e, int) and e is not None
                   for op in parsed for _, e in op[2])

    def _whole_or_region(self, node):
        return (is_region(node) and node.args[0].id in self.annotated) or (
            isinstance(node, ast.Name) and node.id in self.annotated)

    # -- the element forms: through the flat view -------------------------------------

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        g = self.annotated.get(node.value.id) if isinstance(node.value, ast.Name) else None
        if g is None:
            return node
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Slice) for i in indices) or len(indices) != len(g.shape):
            raise self.ctx.error(f"`{ast.unparse(node)}`: tensor {g.name!r} is laid out by "
                                 f"T.annotate_layout (line {g.line}); index one element "
                                 f"with all {len(g.shape)} indices, or copy a region of it "
                                 f"with T.copy / T.atomic_add", node)
        flat = g.flat(indices, lambda m: self.ctx.error(m, node))
        return ast.copy_location(ast.Subscript(ast.Name(g.flat_name, ast.Load()), flat,
                                               node.ctx), node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _ELEMENT_ATOMICS and \
                isinstance(node.args[0], ast.Name) and node.args[0].id in self.annotated:
            g = self.annotated[node.args[0].id]
            flat = g.flat(node.args[1].elts, lambda m: self.ctx.error(m, node))
            node.args[0] = ast.Name(g.flat_name, ast.Load())
            node.args[1] = ast.Tuple([flat], ast.Load())
            return node
        if is_region(node) and node.args[0].id in self.annotated:
            raise self.ctx.error(f"`{ast.unparse(node)}`: a region of tensor "
                                 f"{node.args[0].id!r}, which T.annotate_layout lays out, "
                                 f"is supported in T.copy and T.atomic_add", node)
        return node



def _accesses(tree, names):
    """(node, name) of each use of ``names`` in ``tree`` other than ``X.shape`` /
    ``X.dtype``: what reads or writes the tensor's elements."""
    for node in syntax.walk(tree):
        for child in syntax.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id in names and not (
                    isinstance(node, ast.Attribute) and node.attr in ("shape", "dtype")):
                yield node, child.id


def _check_other_uses(fdef, annotated, ctx):
    """A laid-out tensor's name is left only in ``G.shape`` (and its flat view's
    definition): any other use (a tile operation the pass does not expand) is an error."""
    for node, name in _accesses(fdef, annotated):
        raise ctx.error(f"`{ast.unparse(node)}`: tensor {name!r} is laid out by "
                        f"T.annotate_layout (line {annotated[name].line}); it may be indexed "
                        f"one element at a time or copied with T.copy / T.atomic_add, not "
                        f"used here", node)


def _shape_of(name, d):
    return ast.Subscript(ast.Attribute(ast.Name(name, ast.Load()), "shape", ast.Load()),
                         ast.Constant(d), ast.Load())


def _extents_text(extents) -> str:
    return "(" + ", ".join(str(e) if isinstance(e, int) else ast.unparse(e)
                           for e in extents) + ("," if len(extents) == 1 else "") + ")"


def _zero(op):
    """0 in the dtype of operand ``op``'s tensor (what an element outside it reads as)."""
    return ast.Call(ast.Name(CAST, ast.Load()), [ast.Constant(0),
                                                 ast.Constant(op[4].dtype.name)], [])


def _run_time_prefix_copy(ops, ctx) -> bool:
    """A copy between a tensor's region and a shared tile's region, a sliced dimension
    of either of an extent the source does not give (``A[0:n]``)."""
    if ops is None or not all(is_region(x) for x in ops):
        return False
    kinds = ["tensor" if x.args[0].id in ctx.params else getattr(
        ctx.plan.tiles.get(x.args[0].id), "kind", None) for x in ops]
    if sorted(kinds) != ["shared", "tensor"]:
        return False
    return any(k == "s" and e in ("", "0") for x in ops
               for k, e in zip(x.args[1].value, x.args[4].value.split(",")))


def _tensor_copy(ops, params) -> bool:
    """Whether a copy's two operands are both tensors (whole or regions)."""
    return ops is not None and all(
        (x.args[0].id if is_region(x) else x.id if isinstance(x, ast.Name) else None) in params
        for x in ops)


def lay_out_global_tensors(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    statements = _annotations(fdef, ctx.namespace)
    if not any(isinstance(k, ast.Name) and k.id in ctx.params
               for s in statements for k in s.value.args[0].keys) and not any(
            isinstance(s, ast.Expr) and (
                _tensor_copy(copy_operands(s, ctx.namespace), ctx.params)
                or _run_time_prefix_copy(copy_operands(s, ctx.namespace), ctx))
            for s in syntax.walk(fdef)):
        return fdef
    scope = AnnotationScope(ctx, fdef)
    annotated: dict = {}
    top = {id(s): i for i, s in enumerate(fdef.body)}
    for stmt in statements:
        dict_node = stmt.value.args[0]
        keep = []
        for k, v in zip(dict_node.keys, dict_node.values):
            if not (isinstance(k, ast.Name) and k.id in ctx.params):
                keep.append((k, v))
                continue
            _check_placement(ctx, fdef, top.get(id(stmt)), stmt, k.id)
            annotated[k.id] = _layout(ctx, scope, k.id, v, stmt.lineno, annotated.get(k.id))
        dict_node.keys, dict_node.values = [k for k, _ in keep], [v for _, v in keep]
    fdef = _Rewrite(ctx, fdef, annotated).visit(fdef)
    _check_other_uses(fdef, annotated, ctx)
    views = [ast.Assign([ast.Name(g.flat_name, ast.Store())], ast.Call(
        ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "reshape", ast.Load()),
        [ast.Name(g.name, ast.Load()), ast.Tuple([ast.Constant(math.prod(g.shape))],
                                                ast.Load())], []))
             for g in annotated.values()]
    # (an annotation of a tensor is a statement of the body: _check_placement)
    fdef.body = views + [s for s in fdef.body if not _emptied(s, ctx.namespace)]
    return syntax.fix_missing_locations(fdef)


def _check_placement(ctx, fdef, index, stmt, name):
    """A tensor's layout holds for the whole kernel, as the simulator applies it from
    the statement on: the annotation must be a statement of the kernel's body (not in a
    loop or a branch) before any access of the tensor."""
    if index is None:
        raise ctx.error(f"T.annotate_layout of tensor {name!r} must be a statement of the "
                        f"kernel's body, not inside a loop or a branch: the layout says where "
                        f"every element of {name!r} is, for the whole kernel", stmt)
    for node, _ in _accesses(ast.Module(fdef.body[:index], []), {name}):
        raise ctx.error(f"tensor {name!r} is accessed at line {getattr(node, 'lineno', '?')} "
                        f"before its T.annotate_layout at line {stmt.lineno}: the layout "
                        f"holds for every access, so annotate the tensor first", node)


def _emptied(stmt, namespace) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and resolve_static(stmt.value.func, namespace) is T.annotate_layout
            and isinstance(stmt.value.args[0], ast.Dict) and not stmt.value.args[0].keys)


def _layout(ctx, scope, name, value_node, line, before):
    tensor = ctx.params[name]
    shape = [ctx.namespace.get(shape_constant_name(name, d)) for d in range(tensor.ndim)]
    if not all(isinstance(n, int) for n in shape):
        raise ctx.error(f"T.annotate_layout of tensor {name!r}: its shape must be known at "
                        f"compile time (give it in the tensor's annotation)", line)
    scope.scope[name] = GlobalBuffer(name, shape, tensor.dtype)
    layout = annotation_value(ctx, scope, name, value_node, line)
    if isinstance(layout, UserFragment) or not isinstance(layout, UserLayout):
        raise ctx.error(f"T.annotate_layout: tensor {name!r} takes a T.Layout, got "
                        f"{layout!r} (`{ast.unparse(value_node)}`)", line)
    try:
        out_shape = checked_output_shape(layout, tuple(int(n) for n in shape), repr(name))
    except LayoutError as e:
        raise ctx.error(str(e), line) from None
    if before is not None:
        if before.layout is not layout and not layout.is_equal(before.layout):
            raise ctx.error(f"T.annotate_layout: tensor {name!r} is given two different "
                            f"layouts (lines {before.line} and {line})", line)
        return before
    return _Annotated(name, layout, tuple(int(s) for s in shape), out_shape,
                      f"__tj_laid_out_{name}", line)


_CHUNK = 1 << 20          # elements evaluated at a time: a tensor's domain can be large


def _outputs(layout, shape, lo, hi, what):
    coords = np.unravel_index(np.arange(lo, hi, dtype=np.int64), shape)
    outs = evaluate_user_function(lambda *c: layout.forward(*c), what, shape, coords)
    outs = [np.broadcast_to(np.asarray(o), coords[0].shape) for o in outs]
    for o in outs:
        if not np.issubdtype(o.dtype, np.integer):
            raise LayoutError(f"{what}: expected integer physical indices, got values of "
                              f"type {o.dtype}")
    return coords, outs


def _flat(layout, shape, lo, hi, strides, what):
    coords, outs = _outputs(layout, shape, lo, hi, what)
    return coords, sum(o.astype(np.int64) * st for o, st in zip(outs, strides))


def _raise_duplicate(layout, shape, numel, strides, what):
    taken = np.zeros(numel, dtype=bool)
    for lo in range(0, numel, _CHUNK):
        coords, flat = _flat(layout, shape, lo, min(lo + _CHUNK, numel), strides, what)
        order = np.argsort(flat, kind="stable")
        twice = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
        again = np.nonzero(taken[flat])[0]
        if twice.size or again.size:
            k = int(order[twice[0] + 1]) if twice.size else int(again[0])
            raise LayoutError(f"{what}: not a bijection: index {[int(c[k]) for c in coords]} "
                              f"maps to physical index {int(flat[k])}, which another element "
                              f"already has; expected each of the {numel} elements at its "
                              f"own index in [0, {numel})")
        taken[flat] = True


def checked_output_shape(layout, shape, name) -> tuple:
    """The layout's output shape over a tensor of ``shape``, after checking that it maps
    the tensor's elements one to one onto ``[0, numel)`` (``T.Layout.check``'s test,
    evaluated a chunk of the domain at a time, with a bitmap of the positions taken)."""
    what = f"T.Layout forward_fn for {name}"
    if tuple(layout.get_input_shape()) != shape:
        raise LayoutError(f"T.annotate_layout: the layout of {name} has input shape "
                          f"{list(layout.get_input_shape())}, expected the tensor's shape "
                          f"{list(shape)}")
    numel = math.prod(shape)
    most = None
    for lo in range(0, numel, _CHUNK):
        coords, outs = _outputs(layout, shape, lo, min(lo + _CHUNK, numel), what)
        for k, o in enumerate(outs):
            if (o < 0).any():
                at = [int(c[np.argmax(o < 0)]) for c in coords]
                raise LayoutError(f"{what}: physical index out of range: output {k} at index "
                                  f"{at} is negative, expected a value >= 0")
        chunk_most = [int(o.max()) for o in outs]
        most = chunk_most if most is None else [max(a, b) for a, b in zip(most, chunk_most)]
    out_shape = tuple(m + 1 for m in most)
    strides = [math.prod(out_shape[k + 1:]) for k in range(len(out_shape))]
    taken = np.zeros(numel, dtype=bool)
    for lo in range(0, numel, _CHUNK):
        coords, flat = _flat(layout, shape, lo, min(lo + _CHUNK, numel), strides, what)
        if (flat >= numel).any():
            k = int(np.argmax(flat >= numel))
            raise LayoutError(f"{what}: physical index out of range: index "
                              f"{[int(c[k]) for c in coords]} maps to {int(flat[k])} (output "
                              f"shape {list(out_shape)}), expected a value in [0, {numel}) "
                              f"(the tensor's {numel} elements)")
        taken[flat] = True
    if np.count_nonzero(taken) != numel:       # some position taken twice: find one
        _raise_duplicate(layout, shape, numel, strides, what)
    return out_shape

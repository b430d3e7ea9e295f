"""Pass: TileLang's ``T.annotate_safe_value({A: v})``: the elements outside global tensor A
read as ``v`` instead of 0, in element reads and in the tile copies from A.

The statement becomes the assignment of each value to a variable of its own (evaluated
once, where it is written), named in ``ctx.safe_values`` ({A: (that variable, line)});
one value per tensor in a kernel (TileLang scopes it to the enclosing block, which
tilejit does not model), written before the tensor's first use where it runs
unconditionally or under ``if`` tests known at compile time. Each ``T.copy`` from a
region of A (or all of A) becomes the element loop it means, its operands paired as the
simulator pairs them (dimensions of extent 1 set aside; an operand given by its corner,
``A[r, c]``, takes the other's extents in its last dimensions):

    T.copy(A[r0:r1, c0:c1], S)   →   for i, j in T.Parallel(r1 - r0, c1 - c0):
                                         S[i, j] = (A[r0 + i, c0 + j] if <inside A>
                                                    else <v in S's dtype>)

(the value converted to the destination's dtype, as TileLang pads; a destination tensor's
stores clip at its edges, as a tile copy's do). The guard pass gives A's other reads the
value outside A (``safe_memory.py``, also without TileLang's safe memory access). Those
copies run as element loops, never as TMA or ``cp.async`` zero-fills: a padding value
other than 0 is the point of the annotation.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import assigned_names, resolve_static, static_truth
from tilejit.ir.markers import CAST
from tilejit.passes.element_loops import (index, inside_tensor, is_region, known_shape,
                                           parallel_loop)


def _annotation(stmt, namespace):
    """The dict of a ``T.annotate_safe_value({...})`` statement, else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and resolve_static(stmt.value.func, namespace) is T.annotate_safe_value):
        return None
    return stmt.value


class _Collect:
    """Takes the annotations out of the program, into ``ctx.safe_values``."""

    def __init__(self, ctx, fdef):
        self.ctx, self.assigned = ctx, assigned_names(fdef)
        self.seen = {}          # name -> the line of its first use, in program order
        self.variables = {}     # tensor name -> the variable its safe value is held in
        self.sources = {}       # tensor name -> (the value as written, its line)

    def block(self, stmts: list, when: str) -> None:
        """``stmts`` in place; ``when``: "always" (they run whenever the kernel does, as
        far as compile-time tests go), "never" (a branch compile-time tests rule out) or
        "maybe"."""
        kept = []
        for stmt in stmts:
            call = _annotation(stmt, self.ctx.namespace)
            if call is not None:
                if when != "never":       # the value, evaluated once where it is written
                    kept.extend(ast.copy_location(a, stmt)
                                for a in self.take(call, when == "always"))
                continue
            kept.append(stmt)
            self._uses(stmt)
            if isinstance(stmt, ast.If):
                truth = static_truth(stmt.test, self.ctx.namespace, self.assigned)
                for branch, taken in ((stmt.body, True), (stmt.orelse, False)):
                    self.block(branch, "never" if when == "never" or truth is (not taken)
                               else when if truth is taken else "maybe")
                continue
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    # a loop's body or a `with` block's (a T.ws role: some threads)
                    # may not run
                    self.block(inner, "never" if when == "never" else "maybe")
        if kept != stmts:
            stmts[:] = kept or [ast.copy_location(ast.Pass(), stmts[0])]

    def _uses(self, stmt) -> None:
        """The names a statement's own parts use but through an attribute (a compound
        statement's header; its body is walked statement by statement)."""
        parts = [stmt] if not hasattr(stmt, "body") else [
            getattr(stmt, f) for f in ("test", "iter", "items") if getattr(stmt, f, None)]
        for part in parts:
            nodes = list(syntax.walk(part) if isinstance(part, ast.AST) else (
                n for item in part for n in syntax.walk(item)))
            # `A.shape` reads no element
            queried = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
            for node in nodes:
                if isinstance(node, ast.Name) and id(node) not in queried:
                    self.seen.setdefault(node.id, getattr(node, "lineno", stmt.lineno))

    def take(self, call, known: bool) -> list:
        """The assignments of the annotation's values to variables of their own."""
        ctx = self.ctx
        out = []
        if call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
            raise ctx.error("T.annotate_safe_value({tensor: value, ...}) takes one dict "
                            f"written in the call, got `{ast.unparse(call)}`", call)
        if not known:
            raise ctx.error("T.annotate_safe_value under a loop or a run-time condition: "
                            "write it where the kernel always runs it (at the top of its "
                            "T.Kernel body, or under an `if` known at compile time)", call)
        for key, value in zip(call.args[0].keys, call.args[0].values):
            if not (isinstance(key, ast.Name) and key.id in ctx.params):
                raise ctx.error(f"T.annotate_safe_value: the keys are tensor parameters of "
                                f"the kernel, got `{ast.unparse(key) if key else '**'}`", call)
            if key.id in self.seen:
                raise ctx.error(f"T.annotate_safe_value: {key.id} is used before it (line "
                                f"{self.seen[key.id]}); write the annotation before the "
                                f"kernel's first use of {key.id}", call)
            if any(isinstance(n, ast.Name) and n.id == key.id for n in syntax.walk(value)):
                raise ctx.error(f"T.annotate_safe_value: the safe value of {key.id} reads "
                                f"{key.id} (`{ast.unparse(value)}`); read it into a variable "
                                "first", call)
            before = self.sources.get(key.id)
            if before is not None:
                raise ctx.error(f"T.annotate_safe_value: {key.id} already has the safe value "
                                f"`{before[0]}` (line {before[1]}); tilejit keeps one per "
                                f"tensor in a kernel, got `{ast.unparse(value)}`", call)
            self.sources[key.id] = (ast.unparse(value), call.lineno)
            name = self.variables[key.id] = f"__tj_safe_value_{key.id}"
            ctx.safe_values[key.id] = (ast.Name(name, ast.Load()), call.lineno)
            out.append(ast.Assign([ast.Name(name, ast.Store())], value))
        return out


class _Operand:
    """A copy operand as ``sim/semantics._operand`` reads it: its tensor or tile, the
    start of each dimension, the ranged (sliced) dimensions (None: given by its corner)
    and their extents (None where the region does not say them)."""

    def __init__(self, name, starts, ranged, extents, tensor, sizes=None):
        self.name, self.starts, self.ranged, self.extents = name, starts, ranged, extents
        self.tensor = tensor        # a tensor parameter (its stores clip at its edges)
        self.sizes = sizes          # each ranged dimension's known extent, or None


class _Copies(syntax.NodeTransformer):
    """``T.copy`` from an annotated tensor → the element loop, its operands paired as the
    simulator pairs them (``sim/semantics._resolve``)."""

    def __init__(self, ctx, variables):
        self.ctx, self.variables = ctx, variables

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) >= 2
                and resolve_static(call.func, self.ctx.namespace) is T.copy):
            return node
        src, dst = call.args[:2]
        name = src.args[0].id if is_region(src) else getattr(src, "id", None)
        if name not in self.ctx.safe_values:
            return node
        return ast.copy_location(self._loop(src, dst, call), node)

    def _shape(self, name, call):
        ctx = self.ctx
        if name in ctx.plan.tiles or name in ctx.params:
            return known_shape(ctx, name)
        raise ctx.error(f"T.copy from a tensor with a safe value: the operand {name!r} is "
                        "not a tile or a tensor parameter; copy into a whole tile, a region "
                        f"of one, or a region of a tensor (`{ast.unparse(call)}`)", call)

    def _operand(self, node, call) -> _Operand:
        ctx = self.ctx
        if is_region(node):
            name = node.args[0].id
            kinds, starts = node.args[1].value, list(node.args[2].elts)
            ends = node.args[3].elts
            ranged = [d for d, k in enumerate(kinds) if k == "s"]
            shape = self._shape(name, call)
            sizes = [int(e) for e in node.args[4].value.split(",")]    # one per dimension
            extents = []
            for d in ranged:
                size, end = sizes[d], ends[d]
                if not size and isinstance(end, ast.Constant) and end.value is None and \
                        name in ctx.plan.tiles and isinstance(starts[d], ast.Constant):
                    size = shape[d] - starts[d].value       # `S[:, k:]`: to the tile's end
                extents.append(size or None)
            known = ranged and all(extents)
            return _Operand(name, starts, ranged or None, tuple(extents) if known else None,
                            name in ctx.params, extents)
        if isinstance(node, ast.Name):
            shape = self._shape(node.id, call)
            if shape is None:
                raise ctx.error(f"T.copy from a tensor with a safe value: {node.id}'s shape "
                                "is not known at compile time; copy a region of it", call)
            return _Operand(node.id, [ast.Constant(0)] * len(shape), list(range(len(shape))),
                            shape, node.id in ctx.params)
        raise ctx.error("T.copy from a tensor with a safe value: the destination "
                        f"`{ast.unparse(node)}` is not a tile, a region of one or a region of "
                        "a tensor (a stage of a stacked tile is not supported)", call)

    def _to_end(self, op: _Operand, call):
        """A tensor region's open slices run to the tensor's edge (both operands silent):
        its extents, the known ones as they are, an open slice's from a constant start to
        the compile-time shape; None where one stays unknown."""
        shape = self._shape(op.name, call) if op.tensor else None
        if op.ranged is None or shape is None:
            return None
        extents = []
        for d, size in zip(op.ranged, op.sizes):
            if size is None and isinstance(op.starts[d], ast.Constant):
                size = shape[d] - op.starts[d].value
            if size is None:
                return None
            extents.append(size)
        return tuple(extents)

    def _match(self, op: _Operand, ndim, other, call):
        """The ranged dims and extents of an operand whose extent comes from the other's."""
        if op.ranged is None:           # A[r0, c0]: the last dims, starting there
            if len(other) > ndim:
                raise self.ctx.error(f"T.copy: a {ndim}-d region cannot hold a "
                                     f"{tuple(other)} tile (`{ast.unparse(call)}`)", call)
            return list(range(ndim - len(other), ndim)), tuple(other)
        squeezed = [e for e in other if e != 1] if len(other) != len(op.ranged) else list(other)
        if len(squeezed) != len(op.ranged):
            raise self.ctx.error(f"T.copy: the region has {len(op.ranged)} sliced "
                                 f"dimension(s), the other operand's shape is {tuple(other)} "
                                 f"(`{ast.unparse(call)}`)", call)
        return op.ranged, tuple(squeezed)

    def _loop(self, src_node, dst_node, call):
        ctx = self.ctx
        src, dst = self._operand(src_node, call), self._operand(dst_node, call)
        if src.ranged is None and dst.ranged is None:   # T.copy(A[i], B[j]): one element
            src.ranged, src.extents, dst.ranged, dst.extents = [], (), [], ()
        if src.extents is None and dst.extents is None:
            src.extents = self._to_end(src, call)
        if src.extents is None and dst.extents is None:
            raise ctx.error("T.copy from a tensor with a safe value: neither operand says the "
                            "extent of the copy at compile time; give a slice start:stop of "
                            f"a compile-time extent (`{ast.unparse(call)}`)", call)
        if src.extents is None:
            src.ranged, src.extents = self._match(src, len(src.starts), dst.extents, call)
        if dst.extents is None:
            dst.ranged, dst.extents = self._match(dst, len(dst.starts), src.extents, call)
        extents = [e for e in src.extents if e != 1]
        if extents != [e for e in dst.extents if e != 1]:
            raise ctx.error(f"T.copy: source extent {tuple(src.extents)} and destination "
                            f"extent {tuple(dst.extents)} differ (`{ast.unparse(call)}`)", call)
        seq = ctx.number("safe_copy")
        names = [f"__tj_sv{seq}_{k}" for k in range(len(extents))]

        def indices(op):
            it, elts = iter(names), []
            sizes = dict(zip(op.ranged, op.extents))
            for d, start in enumerate(op.starts):
                if sizes.get(d, 1) == 1:
                    elts.append(copy.deepcopy(start))
                    continue
                var = ast.Name(next(it), ast.Load())
                zero = isinstance(start, ast.Constant) and start.value == 0
                elts.append(var if zero else ast.BinOp(copy.deepcopy(start), ast.Add(), var))
            return elts

        s_idx, d_idx = indices(src), indices(dst)
        read = ast.Subscript(ast.Name(src.name, ast.Load()), index(s_idx), ast.Load())
        read._tj_guarded = True         # guarded here: the guard pass leaves it
        outside = ast.Call(ast.Name(CAST, ast.Load()),
                           [ast.Name(self.variables[src.name], ast.Load()),
                            ast.Constant(self._dtype(dst.name))], [])
        value = ast.IfExp(inside_tensor(src.name, s_idx), read, outside)
        stmt = ast.Assign([ast.Subscript(ast.Name(dst.name, ast.Load()), index(d_idx),
                                         ast.Store())], value)
        if dst.tensor:                  # a tile copy never writes past a tensor's edge
            stmt = ast.If(inside_tensor(dst.name, d_idx), [stmt], [])
        return parallel_loop(names, extents, [stmt]) if extents else stmt

    def _dtype(self, name) -> str:
        tile = self.ctx.plan.tiles.get(name)
        return (tile.dtype if tile is not None else self.ctx.params[name].dtype).name


def expand_safe_value_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    collect = _Collect(ctx, fdef)
    collect.block(fdef.body, "always")
    if not ctx.safe_values:
        return fdef
    return syntax.fix_missing_locations(_Copies(ctx, collect.variables).visit(fdef))

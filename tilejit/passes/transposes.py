"""Pass: ``T.transpose(src, dst)`` becomes the element loop it means. The operands are
tiles, tensors or regions of either, of two or more dimensions; ``dst``'s extents are
``src``'s with the last two swapped (TileLang's: the leading dimensions are a batch)::

    T.transpose(S, S_t)                  for i, j in T.Parallel(M, N):
                                     →       S_t[j, i] = S[i, j]
    T.transpose(A[b, 0:4, 0:8],          for i, j in T.Parallel(4, 8):
                B[b, 2:10, 0:4])     →       if <B[b, 2 + j, i] inside B>:
                                                 B[b, 2 + j, i] = (A[b, i, j] if <inside A>
                                                                   else 0)

As ``T.copy``, a tensor's elements outside it are never read (they read as 0, or the
tensor's ``T.annotate_safe_value``) nor written. Shared tiles are read and written
element by element (the barrier pass orders them); a fragment on either side is then a
fragment indexed transposed in a T.Parallel, which ``fragment_transposes.py`` (the next
passes) takes through shared memory. ``sim/semantics.transpose`` is the same operation."""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.frontend.tile_operands import region_source
from tilejit.ir.markers import CAST
from tilejit.passes.element_loops import (index, inside_tensor, is_region, known_shape,
                                           parallel_loop)


@dataclass
class _Operand:
    name: str
    starts: list            # one expression per dimension
    ranged: list            # the sliced dimensions, in order
    extents: tuple          # theirs
    tensor: bool            # a tensor parameter (its accesses stay inside it)


class _Transposes(syntax.NodeTransformer):
    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.transpose):
            return node
        given = dict(zip(("src", "dst"), call.args))
        given.update((k.arg, k.value) for k in call.keywords if k.arg in ("src", "dst"))
        if set(given) != {"src", "dst"}:
            raise self._error("T.transpose(src, dst) takes a source and a destination", call)
        src, dst = (self._operand(given[r], r, call) for r in ("src", "dst"))
        k = len(src.ranged)
        if k < 2:
            raise self._error(f"T.transpose: src `{self._text(given['src'])}` has {k} sliced "
                              f"dimension(s); it transposes the last two of two or more",
                              call)
        want = src.extents[:-2] + (src.extents[-1], src.extents[-2])
        if dst.extents != want:
            raise self._error(f"T.transpose: dst `{self._text(given['dst'])}` has extents "
                              f"{dst.extents}; src's {src.extents} with the last two swapped "
                              f"are {want}", call)
        seq = self.ctx.number("transpose")
        names = [f"__tj_tp{seq}_{d}" for d in range(k)]
        swapped = names[:-2] + [names[-1], names[-2]]
        s_idx, d_idx = _indices(src, names), _indices(dst, swapped)
        value = ast.Subscript(ast.Name(src.name, ast.Load()), index(s_idx), ast.Load())
        if src.tensor:
            value._tj_guarded = True        # guarded here: the guard pass leaves it
            safe = self.ctx.safe_values.get(src.name)
            outside = ast.Call(ast.Name(CAST, ast.Load()),
                               [copy.deepcopy(safe[0]) if safe else ast.Constant(0),
                                ast.Constant(self._dtype(dst.name))], [])
            value = ast.IfExp(inside_tensor(src.name, s_idx), value, outside)
        stmt = ast.Assign([ast.Subscript(ast.Name(dst.name, ast.Load()), index(d_idx),
                                         ast.Store())], value)
        if dst.tensor:
            stmt = ast.If(inside_tensor(dst.name, d_idx), [stmt], [])
        loop = parallel_loop(names, list(src.extents), [stmt])
        return syntax.fix_missing_locations(ast.copy_location(loop, node))

    def _error(self, message, call):
        return self.ctx.error(f"{message} (`{self._text(call)}`)", call)

    @staticmethod
    def _text(node) -> str:
        return region_source(ast.unparse(node))

    def _operand(self, node, role, call) -> _Operand:
        ctx = self.ctx
        name = node.args[0].id if is_region(node) else getattr(node, "id", None)
        if name not in ctx.plan.tiles and name not in ctx.params:
            raise self._error(f"T.transpose: {role} must be a tile, a tensor or a region of "
                              f"one, got `{self._text(node)}`", call)
        shape = known_shape(ctx, name)
        if not is_region(node):
            if shape is None:
                raise self._error(f"T.transpose: the shape of tensor {name!r} is not known "
                                  f"at compile time; transpose a region of it", call)
            return _Operand(name, [ast.Constant(0)] * len(shape), list(range(len(shape))),
                            shape, name in ctx.params)
        kinds, starts = node.args[1].value, list(node.args[2].elts)
        ends, sizes = node.args[3].elts, [int(e) for e in node.args[4].value.split(",")]
        ranged = [d for d, kind in enumerate(kinds) if kind == "s"]
        extents = []
        for d in ranged:
            size = sizes[d]
            if not size and isinstance(ends[d], ast.Constant) and ends[d].value is None \
                    and shape is not None and isinstance(starts[d], ast.Constant):
                size = shape[d] - starts[d].value       # `X[:, k:]`: to its end
            if size <= 0:
                raise self._error(f"T.transpose: the extent of dimension {d} of {role} "
                                  f"`{self._text(node)}` must be a positive compile-time "
                                  f"value (start:start + n, or constant bounds)", call)
            extents.append(size)
        return _Operand(name, starts, ranged, tuple(extents), name in ctx.params)

    def _dtype(self, name) -> str:
        tile = self.ctx.plan.tiles.get(name)
        return (tile.dtype if tile is not None else self.ctx.params[name].dtype).name


def _indices(op: _Operand, names: list) -> list:
    """The element of ``op`` at loop variables ``names`` (one per sliced dimension)."""
    it, elts = iter(names), []
    for d, start in enumerate(op.starts):
        if d not in op.ranged:
            elts.append(copy.deepcopy(start))
            continue
        var = ast.Name(next(it), ast.Load())
        zero = isinstance(start, ast.Constant) and start.value == 0
        elts.append(var if zero else ast.BinOp(copy.deepcopy(start), ast.Add(), var))
    return elts


def expand_transposes(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ctx.namespace)
               is T.transpose for n in syntax.walk(fdef)):
        return fdef
    return _Transposes(ctx).visit(fdef)

"""TileLang's negative indices (its ``LegalizeNegativeIndex``): an index of a tensor or a
tile that is negative wherever it is evaluated counts from the end of its dimension, as
Python's does::

    B[0] = A[-1]                       →  B[0] = A[A.shape[0] + -1]
    for i in T.serial(4):
        B[i + 1] = A[-i - 1]           →  B[i + 1] = A[A.shape[0] + (-i - 1)]

"Negative wherever it is evaluated" is proved by interval arithmetic over the index's
expression: integer constants and compile-time names, loop indices (``T.serial``,
``T.Parallel``, ``T.grid``, ``T.unroll``, ``T.vectorized``, ``T.Pipelined`` and ``range``,
from 0 or their start's least value) and block indices, from 0, under ``+ - *`` and unary
minus. An index that may be negative or not is left as written: its
out-of-bounds access is reported as any other (the simulator), as TileLang leaves it
with a warning."""
from __future__ import annotations

import ast
import math

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import is_call_to, resolve_static

_LOOPS = (T.serial, T.Parallel, T.grid, T.unroll, T.vectorized, T.Pipelined, range)
_ALLOCATIONS = (T.alloc_shared, T.alloc_fragment, T.alloc_local)
_INF = math.inf


def legalize_negative_indices(fdef: ast.FunctionDef, ks) -> ast.FunctionDef:
    """``fdef`` with the provably negative indices of its tensors and tiles counted from
    the end of their dimensions (the kernel's parameters and the tiles it allocates)."""
    if not any(isinstance(n, (ast.UnaryOp, ast.Constant)) and _negative_literal(n)
               for n in syntax.walk(fdef)):
        return fdef                 # no minus sign anywhere: nothing can be negative
    return _Negatives(fdef, ks.namespace, ks.constexpr_params).visit(fdef)


def _negative_literal(node) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value < 0)


class _Negatives(syntax.NodeTransformer):
    def __init__(self, fdef, namespace, constexprs):
        self.namespace = namespace
        # the tensors: the parameters not compile-time values (the tiles: below)
        self.arrays = {a.arg for a in fdef.args.args} - set(constexprs)
        stored = [n for n in syntax.walk(fdef) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)]
        self.assigned = {n.id for n in stored}
        # name -> the least value its loops and launches start from (none known while
        # the loops' starts are read)
        self.counters: dict = {}
        counting: dict = {}             # id of a Name node a loop or launch binds -> start
        for node in syntax.walk(fdef):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name) and any(
                    is_call_to(node.value, f, namespace) for f in _ALLOCATIONS):
                self.arrays.add(node.targets[0].id)
            if isinstance(node, ast.For) and self._loop(node.iter):
                start = self._start(node.iter)
                if start >= 0:
                    counting.update((id(n), start) for n in _name_nodes(node.target))
            if isinstance(node, ast.With):
                for item in node.items:
                    if item.optional_vars is not None and any(
                            is_call_to(item.context_expr, f, namespace)
                            for f in (T.Kernel, T.ClusterKernel)):
                        counting.update((id(n), 0) for n in _name_nodes(item.optional_vars))
        # a name bound only by such loops and launches (wherever it is stored) is never
        # negative; any other name stored is not known
        unknown = {n.id for n in stored if id(n) not in counting}
        for n in stored:
            if n.id not in unknown:
                self.counters[n.id] = min(self.counters.get(n.id, _INF), counting[id(n)])

    def _loop(self, call) -> bool:
        """Whether ``call`` is one of the loops (``range`` the builtin's, unless the
        program binds the name)."""
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                call.func.id == "range" and "range" not in self.namespace:
            return True
        return any(is_call_to(call, f, self.namespace) for f in _LOOPS)

    def _start(self, call):
        """The least value a loop's indices take: 0 for one bound (``T.serial(n)``) and
        for several extents (``T.Parallel(m, n)``, ``T.grid``), else its start's least
        value (-inf where unknown)."""
        if is_call_to(call, T.Parallel, self.namespace) or is_call_to(call, T.grid,
                                                                        self.namespace):
            return 0
        start = [k.value for k in call.keywords if k.arg == "start"]
        if len(call.args) >= 2:
            start = [call.args[0]]
        step = [k.value for k in call.keywords if k.arg == "step"] + list(call.args[2:3])
        if step and self._bounds(step[0])[0] <= 0:
            return -_INF            # a step that may count down: no start is the least
        return self._bounds(start[0])[0] if start else 0

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and node.value.id in self.arrays):
            return node
        tuple_index = isinstance(node.slice, ast.Tuple)
        index = list(node.slice.elts) if tuple_index else [node.slice]
        changed = False
        for d, e in enumerate(index):
            if isinstance(e, ast.Slice) or self._bounds(e)[1] >= 0:
                continue
            extent = ast.Subscript(ast.Attribute(ast.Name(node.value.id, ast.Load()),
                                                 "shape", ast.Load()),
                                   ast.Constant(d), ast.Load())
            index[d] = ast.copy_location(ast.BinOp(extent, ast.Add(), e), e)
            changed = True
        if not changed:
            return node
        node.slice = ast.Tuple(index, ast.Load()) if tuple_index else index[0]
        return syntax.fix_missing_locations(node)

    def _bounds(self, e) -> tuple[float, float]:
        """The least and greatest values ``e`` may take (±inf: unknown)."""
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and \
                not isinstance(e.value, bool):
            return e.value, e.value
        if isinstance(e, ast.Name):
            if e.id in self.counters:
                return self.counters[e.id], _INF
            if e.id not in self.assigned:
                value = resolve_static(e, self.namespace)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value, value
            return -_INF, _INF
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            lo, hi = self._bounds(e.operand)
            return -hi, -lo
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
            (a, b), (c, d) = self._bounds(e.left), self._bounds(e.right)
            if isinstance(e.op, ast.Add):
                return a + c, b + d
            if isinstance(e.op, ast.Sub):
                return a - d, b - c
            products = [_times(x, y) for x in (a, b) for y in (c, d)]
            return min(products), max(products)
        return -_INF, _INF


def _times(x, y):
    """x · y of interval ends, 0 · ∞ being 0 (an end at 0 stays at 0)."""
    return 0 if x == 0 or y == 0 else x * y


def _name_nodes(target) -> list:
    if isinstance(target, ast.Name):
        return [target]
    return [n for e in getattr(target, "elts", []) for n in _name_nodes(e)]


__all__ = ["legalize_negative_indices"]

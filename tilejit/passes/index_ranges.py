"""The range of values an index expression of the kernel can take, where its names'
ranges are known: what TileLang's arithmetic analyzer proves before it leaves a safe-memory
guard out (``safe_memory.py``).

Known ranges, over the whole kernel (sound wherever the name is read):

- a block index whose grid extent is compile-time (``bx = __tj_block_index(0, 64)``,
  ``frontend/static_grid.py``): [0, 63];
- a loop variable of ``T.Parallel``, ``T.serial``, ``T.unroll``, ``T.vectorized``,
  ``T.Pipelined`` or ``range`` whose bounds have known ranges and no step: [start,
  stop - 1] (a name that is the variable of several loops: the union; one also assigned
  elsewhere: unknown);
- a name assigned once, from an expression of known range;
- compile-time values (``passes/static_eval.py``): constants, specialized shape entries.

An expression of ``+``, ``-``, ``*``, ``//`` and ``%`` (of a non-negative value by a
positive constant) and unary ``-`` of such names has the interval arithmetic's range;
anything else is unknown (None), as is a range past 2**31 in magnitude."""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import BLOCK_INDEX
from tilejit.passes.static_eval import NotStatic, StaticEval

_LOOPS = (T.Parallel, T.serial, T.unroll, T.vectorized, T.Pipelined, range)
# a bound or step given by keyword (``T.Pipelined(0, stop=n)``): not read here
_BOUND_KEYWORDS = ("start", "stop", "step", None)
_INT32 = 2 ** 31


class IndexRanges:
    def __init__(self, fdef: ast.FunctionDef, ctx):
        self.static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
        self.namespace = ctx.namespace
        self.ranges: dict[str, tuple[int, int]] = {}
        self._collect(fdef)

    def _collect(self, fdef):
        # name -> the (kind, node) of each store; a parameter is a store of a value
        # known only when the kernel runs (and hides a global of its name)
        stores: dict[str, list] = {a.arg: [("other", None, None)]
                                   for a in fdef.args.args + fdef.args.kwonlyargs}
        for node in syntax.walk(fdef):
            if isinstance(node, ast.For):
                targets = node.target.elts if isinstance(node.target, ast.Tuple) else \
                    [node.target]
                for axis, t in enumerate(targets):
                    if isinstance(t, ast.Name):
                        stores.setdefault(t.id, []).append(("loop", node, axis))
                    else:
                        for n in syntax.walk(t):
                            if isinstance(n, ast.Name):
                                stores.setdefault(n.id, []).append(("other", None, None))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                stores.setdefault(node.targets[0].id, []).append(("assign", node, None))
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr,
                                 ast.With, ast.comprehension)):
                targets = node.targets if isinstance(node, ast.Assign) else [
                    getattr(node, "target", None)] + [
                    i.optional_vars for i in getattr(node, "items", [])]
                for t in targets:
                    for n in syntax.walk(t) if t is not None else ():
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                            stores.setdefault(n.id, []).append(("other", None, None))
        # names whose ranges depend on others': settle in rounds
        for _ in range(4):
            changed = False
            for name, how in stores.items():
                if name in self.ranges:
                    continue
                found = [self._store_range(kind, node, axis) for kind, node, axis in how]
                if found and None not in found:
                    self.ranges[name] = (min(r[0] for r in found), max(r[1] for r in found))
                    changed = True
            if not changed:
                break

    def _store_range(self, kind, node, axis):
        if kind == "assign":
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                    value.func.id == BLOCK_INDEX:
                if len(value.args) == 2 and isinstance(value.args[1], ast.Constant):
                    return 0, value.args[1].value - 1
                return None
            return self.of(value)
        if kind != "loop" or not isinstance(node.iter, ast.Call) or any(
                k.arg in _BOUND_KEYWORDS for k in node.iter.keywords):
            return None
        loop = resolve_static(node.iter.func, self.namespace)
        if not any(loop is f for f in _LOOPS):
            return None
        args = node.iter.args
        if loop is T.Parallel:
            if axis >= len(args):
                return None
            stop = self.of(args[axis])
            return None if stop is None else (0, stop[1] - 1)
        if axis != 0 or not 1 <= len(args) <= 2:
            return None
        start = (0, 0) if len(args) == 1 else self.of(args[0])
        stop = self.of(args[-1])
        if start is None or stop is None:
            return None
        return start[0], max(start[0], stop[1] - 1)

    def of(self, node) -> tuple[int, int] | None:
        """(lowest, highest) of ``node``'s values, or None (also where a bound passes
        2**31 in magnitude: an int32 computation of it could wrap)."""
        found = self._of(node)
        if found is None or max(abs(found[0]), abs(found[1])) >= _INT32:
            return None
        return found

    def _of(self, node) -> tuple[int, int] | None:
        if isinstance(node, ast.Name) and node.id in self.ranges:
            return self.ranges[node.id]
        if isinstance(node, ast.BinOp):
            a, b = self.of(node.left), self.of(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Add):
                return a[0] + b[0], a[1] + b[1]
            if isinstance(node.op, ast.Sub):
                return a[0] - b[1], a[1] - b[0]
            if isinstance(node.op, ast.Mult):
                products = [x * y for x in a for y in b]
                return min(products), max(products)
            # (of a non-negative operand only: there Python's floor and C's truncation
            # agree, whichever the lowering computes)
            if isinstance(node.op, ast.FloorDiv) and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
                return a[0] // b[0], a[1] // b[0]
            if isinstance(node.op, ast.Mod) and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
                return a if a[1] < b[0] else (0, b[0] - 1)
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = self.of(node.operand)
            return None if a is None else (-a[1], -a[0])
        if isinstance(node, ast.Name) or isinstance(node, (ast.Constant, ast.Attribute,
                                                           ast.Subscript, ast.Call)):
            try:
                value = self.static.value(node)
            except NotStatic:
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                return None
            return value, value
        return None


__all__ = ["IndexRanges"]

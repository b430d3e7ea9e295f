"""Front end: TVM's vector expressions in a statement, as TileLang's programs write them:
``B[i, T.Ramp(j * 4, 1, 4)] = A[i, T.Ramp(j * 4, 1, 4)] * T.Broadcast(s, 4)`` stores four
elements. A statement that holds ``T.Ramp(base, stride, lanes)`` or
``T.Broadcast(value, lanes)`` calls, all of one lane count, is that statement for each
lane: ``for l in range(lanes):`` around it (a serial loop, unrolled where ``lanes`` is
known), each Ramp the index ``base + stride * l`` and each Broadcast its value. A lane of
a Ramp indexing a tensor that is negative when the kernel runs counts from the
dimension's end, as TileLang wraps it; a slice ``a[s:e]`` in the statement
(``packed[0:LANES] = T.Broadcast(v, LANES)``) is its element ``s + l``. Lanes of
different counts in one statement are a ``CompileError`` naming both."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

_LANE = "__tj_lane"


class _Lanes(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace = namespace
        self.error = error
        self.count = 0

    def _vector_calls(self, stmt):
        return [n for n in syntax.walk(stmt) if isinstance(n, ast.Call)
                and resolve_static(n.func, self.namespace) in (T.Ramp, T.Broadcast)]

    def _statement(self, node):
        calls = self._vector_calls(node)
        if not calls:
            return self.generic_visit(node)
        for c in calls:
            want = 3 if resolve_static(c.func, self.namespace) is T.Ramp else 2
            if len(c.args) != want or c.keywords:
                what = "T.Ramp(base, stride, lanes)" if want == 3 else \
                    "T.Broadcast(value, lanes)"
                raise self.error(f"{what} takes {want} positional arguments, got "
                                 f"`{ast.unparse(c)}`", c)
        lanes = {ast.dump(c.args[-1]): c for c in calls}
        if len(lanes) > 1:
            a, b = list(lanes.values())[:2]
            raise self.error(f"vectors of different lane counts in one statement: "
                             f"`{ast.unparse(a)}` and `{ast.unparse(b)}`", node)
        lane = f"{_LANE}{self.count}"
        self.count += 1
        count = copy.deepcopy(calls[0].args[-1])
        body = _Scalar(self.namespace, lane, self.tensors).visit(node)
        loop = ast.For(ast.Name(lane, ast.Store()),
                       ast.Call(ast.Name("range", ast.Load()), [count], []), [body], [], None)
        return syntax.fix_missing_locations(ast.copy_location(loop, node))

    visit_Assign = visit_AugAssign = visit_AnnAssign = visit_Expr = _statement


class _Scalar(syntax.NodeTransformer):
    def __init__(self, namespace, lane, tensors=frozenset()):
        self.namespace = namespace
        self.lane = lane
        self.tensors = tensors

    def visit_Subscript(self, node):
        # a lane of a Ramp index into a tensor that is negative when the kernel runs
        # counts from the dimension's end (TileLang's LegalizeNegativeIndex wraps each
        # lane of a Ramp whose sign is not known: `A[T.Ramp(t - 2, 1, 4)]` at t = 0 reads
        # A[-2], A[-1], A[0], A[1])
        ramps = []
        if isinstance(node.value, ast.Name) and node.value.id in self.tensors:
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            ramps = [k for k, e in enumerate(elts) if isinstance(e, ast.Call)
                     and resolve_static(e.func, self.namespace) is T.Ramp]
        node = self.generic_visit(node)
        if not ramps:
            return node
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for k in ramps:
            e = elts[k]
            extent = ast.Subscript(ast.Attribute(ast.Name(node.value.id, ast.Load()), "shape",
                                                 ast.Load()), ast.Constant(k), ast.Load())
            elts[k] = ast.IfExp(ast.Compare(copy.deepcopy(e), [ast.GtE()], [ast.Constant(0)]),
                                copy.deepcopy(e), ast.BinOp(copy.deepcopy(e), ast.Add(), extent))
        node.slice = ast.Tuple(elts, ast.Load()) if len(elts) > 1 else elts[0]
        return node

    def visit_Slice(self, node):
        # `packed[0:LANES] = T.Broadcast(v, LANES)`: a slice of the lanes' extent, lane l
        # its element `start + l`
        if node.step is not None:
            return node
        start = node.lower if node.lower is not None else ast.Constant(0)
        return ast.copy_location(ast.BinOp(self.visit(start), ast.Add(),
                                           ast.Name(self.lane, ast.Load())), node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        fn = resolve_static(node.func, self.namespace)
        if fn is T.Ramp:
            base, stride, _ = node.args
            index = ast.BinOp(base, ast.Add(), ast.BinOp(stride, ast.Mult(),
                                                         ast.Name(self.lane, ast.Load())))
            return ast.copy_location(index, node)
        if fn is T.Broadcast:
            return node.args[0]
        return node


def expand_vector_lanes(fdef: ast.FunctionDef, namespace: dict, error) -> ast.FunctionDef:
    """``fdef`` with each statement holding T.Ramp / T.Broadcast one per lane."""
    if not any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
               and getattr(n.func, "attr", getattr(n.func, "id", None)) in ("Ramp", "Broadcast")
               for n in syntax.walk(fdef)):
        return fdef
    lanes = _Lanes(namespace, error)
    lanes.tensors = {a.arg for a in fdef.args.args}
    return lanes.visit(fdef)

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
from tilejit.ir.markers import LANGUAGE
from tilejit.language.packed import PACKED_OPS

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
        for c in calls:
            self._check_slices(node, c.args[-1])
        lane = f"{_LANE}{self.count}"
        self.count += 1
        count = copy.deepcopy(calls[0].args[-1])
        target = self._overlapping_target(node)
        if target is not None:
            # `s[T.Ramp(1, 1, 4)] = s[T.Ramp(0, 1, 4)]`: a vector statement loads every lane
            # before it stores any; the lanes' values go to an array of their own first
            return self._two_phase(node, target, lane, count)
        body = _Scalar(self.namespace, lane, self.tensors).visit(node)
        return self._loop(lane, count, [body], node)

    @staticmethod
    def _loop(lane, count, body, where):
        loop = ast.For(ast.Name(lane, ast.Store()),
                       ast.Call(ast.Name("range", ast.Load()), [copy.deepcopy(count)], []),
                       body, [], None)
        return syntax.fix_missing_locations(ast.copy_location(loop, where))

    def _check_slices(self, node, lanes):
        """A slice in a vector statement is one element a lane: its extent must be the
        lanes' count where both are known, and it takes no step."""
        for sl in syntax.walk(node):
            if not isinstance(sl, ast.Slice):
                continue
            if sl.step is not None:
                raise self.error(f"a slice with a step in a vector statement (lanes "
                                 f"`{ast.unparse(lanes)}`): index the lanes with "
                                 f"T.Ramp(start, step, lanes)", node)
            lo = sl.lower.value if isinstance(sl.lower, ast.Constant) else (
                0 if sl.lower is None else None)
            hi = sl.upper.value if isinstance(sl.upper, ast.Constant) else None
            n = lanes.value if isinstance(lanes, ast.Constant) else None
            if None not in (lo, hi, n) and hi - lo != n:
                raise self.error(f"a slice of {hi - lo} element(s) in a vector statement of "
                                 f"{n} lanes: `{ast.unparse(node)}`", node)

    def _overlapping_target(self, node):
        """The name of the buffer an assignment stores into and also reads, or None."""
        if not isinstance(node, (ast.Assign, ast.AugAssign)):
            return None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {t.value.id for t in targets if isinstance(t, ast.Subscript)
                 and isinstance(t.value, ast.Name)}
        read = {n.value.id for n in syntax.walk(node.value) if isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)}
        both = names & read
        return next(iter(both)) if both else None

    def _two_phase(self, node, target, lane, count):
        dtype = self._dtype_of(target, node)
        values = f"__tj_lanes{self.count}"
        scalar = _Scalar(self.namespace, lane, self.tensors)
        value = node.value if isinstance(node, ast.Assign) else ast.BinOp(
            ast.Subscript(copy.deepcopy(node.target.value), copy.deepcopy(node.target.slice),
                          ast.Load()), node.op, node.value)
        first = ast.Assign([ast.Subscript(ast.Name(values, ast.Load()),
                                          ast.Name(lane, ast.Load()), ast.Store())],
                           scalar.visit(copy.deepcopy(value)))
        dst = node.targets[0] if isinstance(node, ast.Assign) else node.target
        second = ast.Assign([scalar.visit(copy.deepcopy(dst))],
                            ast.Subscript(ast.Name(values, ast.Load()),
                                          ast.Name(lane, ast.Load()), ast.Load()))
        alloc = ast.Assign([ast.Name(values, ast.Store())], ast.Call(
            ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "alloc_local", ast.Load()),
            [ast.Tuple([copy.deepcopy(count)], ast.Load()), dtype], []))
        return [syntax.fix_missing_locations(ast.copy_location(alloc, node)),
                self._loop(lane, count, [ast.copy_location(first, node)], node),
                self._loop(lane, count, [ast.copy_location(second, node)], node)]

    def _dtype_of(self, name, node):
        given = self.dtypes.get(name)
        if given is not None:
            return copy.deepcopy(given)
        raise self.error(f"a vector statement that reads the buffer it writes ({name!r}) "
                         f"loads every lane first, into an array of the buffer's dtype, "
                         f"which is not known here: copy the lanes into a T.alloc_local "
                         f"yourself", node)

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


_PACKED = tuple(getattr(T, name) for name in PACKED_OPS)


def _check_packed(fdef: ast.FunctionDef, namespace: dict, error) -> None:
    """TileLang's packed x2 operations (``language/packed.py``) only in statements of 2
    lanes: a packed value is such a statement's two lanes."""
    def vector_lanes(stmt):
        calls = [n for n in syntax.walk(stmt) if isinstance(n, ast.Call)
                 and resolve_static(n.func, namespace) in (T.Ramp, T.Broadcast)]
        return calls[0].args[-1] if calls and calls[0].args else None
    for stmt in syntax.walk(fdef):
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            continue
        for call in syntax.walk(stmt):
            if not (isinstance(call, ast.Call) and resolve_static(call.func, namespace)
                    in _PACKED):
                continue
            name = ast.unparse(call.func)
            lanes = vector_lanes(stmt)
            if lanes is None:
                raise error(f"{name} takes TileLang's packed x2 values (float32x2, "
                            f"float16x2, bfloat16x2): write its statement on two lanes, "
                            f"its operands indexed with T.Ramp(base, stride, 2)", call)
            count = lanes.value if isinstance(lanes, ast.Constant) else \
                resolve_static(lanes, namespace)
            if isinstance(count, bool) or count != 2:
                raise error(f"{name} in a statement of `{ast.unparse(lanes)}` lanes: a packed "
                            f"x2 value is 2 lanes", call)


class _VectorNames(syntax.NodeTransformer):
    """A name bound once to an index vector (``idx = T.Ramp(tid * 2, 1, 2)``, as TVM's
    let binds it) stands for that expression where it is read: each statement that reads
    it holds the Ramp and is expanded per lane. The binding goes; the parts of the vector
    must not change after it (a CompileError where one of its names is assigned again)."""

    def __init__(self, bound: dict):
        self.bound = bound          # name -> the vector expression

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in self.bound:
            return None
        return self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.bound:
            return ast.copy_location(copy.deepcopy(self.bound[node.id]), node)
        return node


def _inline_vector_names(fdef, namespace, error):
    stores: dict = {}
    for n in syntax.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    stores.update({a.arg: stores.get(a.arg, 0) + 1 for a in fdef.args.args})
    bound = {}
    for n in syntax.walk(fdef):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call)
                and resolve_static(n.value.func, namespace) in (T.Ramp, T.Broadcast)):
            continue
        name = n.targets[0].id
        changing = sorted(m.id for m in syntax.walk(n.value) if isinstance(m, ast.Name)
                          and stores.get(m.id, 0) > 1)
        if stores[name] > 1 or changing:
            raise error(f"`{name} = {ast.unparse(n.value)}`: a vector bound to a name is "
                        f"read as its expression, so "
                        + (f"`{name}` may not be assigned again" if stores[name] > 1 else
                           f"its part(s) {', '.join(changing)} may not change after it")
                        + "; write the vector in the statements that use it", n)
        bound[name] = n.value
    return _VectorNames(bound).visit(fdef) if bound else fdef


def expand_vector_lanes(fdef: ast.FunctionDef, namespace: dict, error) -> ast.FunctionDef:
    """``fdef`` with each statement holding T.Ramp / T.Broadcast one per lane."""
    called = {resolve_static(n.func, namespace) for n in syntax.walk(fdef)
              if isinstance(n, ast.Call)}
    if not called & {T.Ramp, T.Broadcast, *_PACKED}:
        return fdef
    fdef = _inline_vector_names(fdef, namespace, error)
    if called & set(_PACKED):
        _check_packed(fdef, namespace, error)
    if not called & {T.Ramp, T.Broadcast}:
        return fdef
    lanes = _Lanes(namespace, error)
    lanes.tensors = {a.arg for a in fdef.args.args}
    lanes.dtypes = buffer_dtypes(fdef, namespace)
    return lanes.visit(fdef)


_ALLOCATIONS = (T.alloc_shared, T.alloc_local, T.alloc_fragment)


def buffer_dtypes(fdef: ast.FunctionDef, namespace: dict) -> dict:
    """{buffer: its dtype as the kernel spells it}: a tensor parameter's ``P.dtype``, an
    allocation's dtype argument (None where it gives none)."""
    dtypes = {a.arg: ast.Attribute(ast.Name(a.arg, ast.Load()), "dtype", ast.Load())
              for a in fdef.args.args}
    for n in syntax.walk(fdef):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                resolve_static(n.value.func, namespace) in _ALLOCATIONS:
            call = n.value
            given = call.args[1] if len(call.args) > 1 else next(
                (k.value for k in call.keywords if k.arg == "dtype"), None)
            for t in n.targets:
                if isinstance(t, ast.Name):
                    dtypes.setdefault(t.id, given)
    return dtypes

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
import inspect

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import LANGUAGE
from tilejit.language.dtypes import DType
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
        targets = node.targets if isinstance(node, ast.Assign) else \
            [getattr(node, "target", None)]
        named = [t for t in targets if isinstance(t, (ast.Name, ast.Tuple, ast.List))]
        if named:
            raise self.error(
                f"`{ast.unparse(node)}`: a statement of {ast.unparse(calls[0].args[-1])} lanes "
                f"assigns `{ast.unparse(named[0])}`, which would hold its last lane only "
                f"(tilejit has no vector values): bind a vector of indices (T.Ramp of names "
                f"and constants), or store the lanes into a T.alloc_local tile and read them "
                f"from it", node)
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
    lanes, each operand a vector (a packed value is such a statement's two lanes)."""
    def vectors(node):
        return [n for n in syntax.walk(node) if isinstance(n, ast.Call)
                and resolve_static(n.func, namespace) in (T.Ramp, T.Broadcast)]

    def own_expressions(stmt):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            return [stmt]
        return [v for f, v in ast.iter_fields(stmt) if isinstance(v, ast.AST)
                and not isinstance(v, ast.stmt)] + [
            i for f, v in ast.iter_fields(stmt) if isinstance(v, list)
            for i in v if isinstance(i, (ast.expr, ast.withitem, ast.arguments))]
    for stmt in syntax.walk(fdef):
        if not isinstance(stmt, ast.stmt):
            continue
        for part in own_expressions(stmt):
            for call in syntax.walk(part):
                if not (isinstance(call, ast.Call) and resolve_static(call.func, namespace)
                        in _PACKED):
                    continue
                name = ast.unparse(call.func)
                if call.keywords:               # T.add2(x=..., y=...): TileLang's names
                    fn = resolve_static(call.func, namespace)
                    try:
                        bound = inspect.signature(fn).bind(
                            *call.args, **{k.arg: k.value for k in call.keywords})
                    except TypeError as e:
                        raise error(f"{name}: {e}", call) from None
                    call.args, call.keywords = list(bound.arguments.values()), []
                lanes = vectors(stmt) if part is stmt else []
                if not lanes:
                    raise error(f"{name} takes TileLang's packed x2 values (float32x2, "
                                f"float16x2, bfloat16x2): write its statement on two lanes, "
                                f"its operands indexed with T.Ramp(base, stride, 2)", call)
                count = lanes[0].args[-1] if lanes[0].args else None
                value = count.value if isinstance(count, ast.Constant) else \
                    resolve_static(count, namespace)
                if isinstance(value, bool) or value != 2:
                    raise error(f"{name} in a statement of `{ast.unparse(count)}` lanes: a "
                                f"packed x2 value is 2 lanes", call)
                for operand in call.args:
                    if not vectors(operand):
                        raise error(f"{name}: its operand `{ast.unparse(operand)}` is not a "
                                    f"vector of 2 lanes (index it with a T.Ramp, or "
                                    f"T.Broadcast a value)", call)


_PURE_CALLS = ("Ramp", "Broadcast", "cast", "Cast", "min", "max", "ceildiv", "floordiv",
               "floormod", "truncdiv", "truncmod", "get_thread_binding",
               "get_block_binding", "get_thread_extent", "get_block_extent")


def _shape_read(node) -> bool:
    """``X.shape`` or ``X.shape[i]`` (and strides): a tensor's layout, not its memory."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr in ("shape", "strides")


def _stored(node) -> set:
    return {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, (ast.Store, ast.Del))}


class _VectorNames:
    """A name bound to a vector of indices or values computed from names and constants
    (``idx = T.Ramp(tid * 2, 1, 2)``, as TVM's let binds it) stands for that expression
    in the statements after the binding in its block and the blocks inside them, each of
    which is then expanded per lane; the binding goes. A binding stops where its name or
    one of its parts is assigned again (and, entering a loop, where the loop assigns
    one); a read of the name after that is a CompileError, as is a vector bound to a name
    that reads memory or calls other functions (its value would be read again at each
    use: a copy into a T.alloc_local tile says when)."""

    def __init__(self, namespace, error):
        self.namespace, self.error = namespace, error
        self.removed = {}           # name -> its (last) binding, for the error

    def _pure(self, expr) -> bool:
        for n in syntax.walk(expr):
            if isinstance(n, ast.Call):
                fn = resolve_static(n.func, self.namespace)
                if isinstance(fn, DType):
                    continue                    # T.int32(x): a cast
                if getattr(fn, "__name__", None) not in _PURE_CALLS or \
                        getattr(fn, "__module__", "").split(".")[0] != "tilejit":
                    return False
            elif isinstance(n, (ast.Subscript, ast.Attribute)) and not _shape_read(n) \
                    and not (isinstance(n, ast.Attribute) and
                             resolve_static(n, self.namespace) is not None) \
                    and not any(_shape_read(p) and n in list(syntax.walk(p))
                                for p in syntax.walk(expr)):
                return False
            elif isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.Lambda)):
                return False
        return True

    def _binding(self, stmt, active):
        """The name ``stmt`` binds to a vector expression (one holding T.Ramp or
        T.Broadcast, or a bound vector's name: ``jdx = idx + 2``), else None."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            return None
        for n in syntax.walk(stmt.value):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in active \
                    or isinstance(n, ast.Call) and resolve_static(
                        n.func, self.namespace) in (T.Ramp, T.Broadcast):
                return stmt.targets[0].id
        return None

    def _substitute(self, node, active):
        class Sub(syntax.NodeTransformer):
            def visit_Name(self, n):
                if isinstance(n.ctx, ast.Load) and n.id in active:
                    return ast.copy_location(copy.deepcopy(active[n.id][0]), n)
                return n
        return Sub().visit(node)

    @staticmethod
    def _kill(active, stored):
        for name in [n for n, (_, parts) in active.items() if n in stored or parts & stored]:
            del active[name]

    def block(self, stmts, active):
        active = dict(active)
        out = []
        for stmt in stmts:
            name = self._binding(stmt, active)
            if name is not None:
                value = self._substitute(stmt.value, active)
                if not self._pure(value):
                    raise self.error(
                        f"`{ast.unparse(stmt)}`: a vector bound to a name is read as its "
                        f"expression where the name is used, and this one reads memory or "
                        f"calls a function (it would be read again at each use); copy its "
                        f"lanes into a T.alloc_local tile, or write the vector in the "
                        f"statements that use it", stmt)
                self._kill(active, {name})
                parts = {n.id for n in syntax.walk(value) if isinstance(n, ast.Name)}
                active[name] = (value, parts)
                self.removed[name] = stmt
                continue
            out.append(self._statement(stmt, active))
            self._kill(active, _stored(stmt))
        return out or [ast.copy_location(ast.Pass(), stmts[0])]

    def _statement(self, stmt, active):
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            inner = dict(active)
            self._kill(inner, _stored(stmt))        # what the loop assigns changes
            if isinstance(stmt, ast.While):
                stmt.test = self._substitute(stmt.test, inner)
            else:
                stmt.iter = self._substitute(stmt.iter, active)
            stmt.body = self.block(stmt.body, inner)
            stmt.orelse = self.block(stmt.orelse, inner) if stmt.orelse else []
            return stmt
        if isinstance(stmt, ast.If):
            stmt.test = self._substitute(stmt.test, active)
            stmt.body = self.block(stmt.body, active)
            stmt.orelse = self.block(stmt.orelse, active) if stmt.orelse else []
            return stmt
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                item.context_expr = self._substitute(item.context_expr, active)
            inner = dict(active)
            self._kill(inner, _stored(ast.Module(body=[ast.Expr(i.optional_vars)
                                                       for i in stmt.items
                                                       if i.optional_vars], type_ignores=[])))
            stmt.body = self.block(stmt.body, inner)
            return stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return stmt
        return self._substitute(stmt, active)

    def check_reads(self, fdef):
        for n in syntax.walk(fdef):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.removed:
                raise self.error(
                    f"`{n.id}` read where its vector `{ast.unparse(self.removed[n.id])}` no "
                    f"longer holds (the name or a part of it was assigned again, or the read "
                    f"is outside the block of the binding): a vector bound to a name is read "
                    f"as its expression; write the vector where it is used", n)


def _inline_vector_names(fdef, namespace, error):
    names = _VectorNames(namespace, error)
    fdef.body = names.block(fdef.body, {})
    names.check_reads(fdef)
    return fdef


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

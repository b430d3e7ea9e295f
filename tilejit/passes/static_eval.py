"""Compile-time values of kernel expressions: tile shapes, dtypes, gemm options.

Evaluates literals, constexpr parameters and specialized shape entries (globals of the
device program), ``A.dtype`` of tensor parameters, names assigned once from such values
(at the top of the body, or once in a loop's body),
arithmetic, tuples, a few pure functions (``T.ceildiv``, ``min``, ``max``, ``int``) and
the program's own Python functions of such values (run at compile time).
Anything else raises ``NotStatic``."""
from __future__ import annotations

import ast
import builtins
import numbers
import math
import operator
import types

from tilejit import syntax
from tilejit import language as T
from tilejit.language.tilelang_names import SYMBOLIC


class NotStatic(Exception):
    pass


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
           ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_PURE = (T.ceildiv, builtins.min, builtins.max, builtins.int, builtins.abs, builtins.len,
         builtins.round, builtins.float, builtins.pow, T.max, T.min, T.as_dtype,
         # Python's math on compile-time values (a shape `math.ceil(max_seqlen / block_N)`)
         math.ceil, math.floor, math.log2, math.log, math.sqrt, math.prod, math.gcd)


def _program_function(fn) -> bool:
    """A plain Python function of the program's (not tilejit's), also where the front end
    made it a ``T.macro`` (a function a kernel calls): run on compile-time values it
    computes one, or raises (a macro's tile operations need a kernel)."""
    fn = fn.func if isinstance(fn, T.macro) else fn
    return isinstance(fn, types.FunctionType) and not (
        getattr(fn, "__module__", None) or "tilejit").startswith("tilejit")


class _ParamDtype:
    def __init__(self, dtype):
        self.dtype = dtype


class StaticEval:
    def __init__(self, namespace: dict, param_dtypes: dict, fdef: ast.FunctionDef | None = None,
                 tiles: dict | None = None):
        self.namespace = namespace
        self.params = {name: _ParamDtype(d) for name, d in param_dtypes.items()}
        self.tiles = tiles or {}            # the plan's tiles: their .shape is known
        self.env: dict = {}
        self.assigned: set[str] = set()     # names the body binds: they hide the namespace's
        if fdef is not None:
            self._collect(fdef)

    def _collect(self, fdef):
        counts: dict[str, int] = {}
        for node in syntax.walk(fdef):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                counts[node.id] = counts.get(node.id, 0) + 1
        # the run-time parameters hide the globals of their names (`def k(A, C, n)` in a
        # module with `n = 64`: the call's n, never the global's 64)
        self.assigned = set(counts) | {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
        for stmt in fdef.body:                  # straight-line top level only
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target = stmt.targets[0]
            names = [target] if isinstance(target, ast.Name) else (
                target.elts if isinstance(target, ast.Tuple) else [])
            if (isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple)
                    and len(stmt.value.elts) == len(names)):
                # element by element: `M, D = (Q.shape[0], <specialized D>)`
                for n, v in zip(names, stmt.value.elts):
                    if isinstance(n, ast.Name) and counts.get(n.id) == 1:
                        try:
                            self.env[n.id] = self.value(v)
                        except NotStatic:
                            pass
                continue
            if not names or not all(isinstance(n, ast.Name) and counts.get(n.id) == 1
                                    for n in names):
                continue
            try:
                value = self.value(stmt.value)
            except NotStatic:
                continue
            if isinstance(target, ast.Name):
                self.env[target.id] = value
            elif isinstance(value, tuple) and len(value) == len(names):
                for n, v in zip(names, value):
                    self.env[n.id] = v
        # a name assigned once in a loop's body from compile-time values (`size = (BK + 1)
        # // 2` in a T.Pipelined body, a T.Parallel's extent after it): the same value
        # wherever it is read (before it, the program has no value at all)
        top = {id(stmt) for stmt in fdef.body}
        nested = sorted((n for n in syntax.walk(fdef) if isinstance(n, ast.Assign)
                         and id(n) not in top and len(n.targets) == 1
                         and isinstance(n.targets[0], ast.Name)
                         and counts.get(n.targets[0].id) == 1),
                        key=lambda n: (n.lineno, n.col_offset))
        for stmt in nested:
            try:
                self.env[stmt.targets[0].id] = self.value(stmt.value)
            except NotStatic:
                continue

    def value(self, node: ast.AST):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.params:
                return self.params[node.id]
            if node.id in self.namespace and node.id not in self.assigned:
                value = self.namespace[node.id]
                if isinstance(value, SYMBOLIC):     # a shape symbol: known when it runs
                    raise NotStatic(node.id)
                return value
            if hasattr(builtins, node.id) and node.id in ("True", "False", "None"):
                return getattr(builtins, node.id)
            raise NotStatic(node.id)
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(
                node.value, ast.Name) and node.value.id in self.tiles:
            return tuple(self.tiles[node.value.id].shape)      # a tile's: f.shape[0]
        if isinstance(node, ast.Attribute):
            base = self.value(node.value)
            if isinstance(base, _ParamDtype) and node.attr != "dtype":
                raise NotStatic(node.attr)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise NotStatic(node.attr) from None
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self.value(node.left), self.value(node.right))
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(node.op, ast.Not):
                return not v
        if isinstance(node, ast.Call):
            fn = self.value(node.func)
            # (TileLang's typed constants: T.int32(16), np.int32(16))
            typed = isinstance(fn, T.DType) or (isinstance(fn, type) and
                                                issubclass(fn, numbers.Number))
            if typed and len(node.args) == 1 and not node.keywords:
                return fn(self.value(node.args[0]))
            if any(fn is p for p in _PURE):
                args = [self.value(a) for a in node.args]
                kwargs = {k.arg: self.value(k.value) for k in node.keywords}
                return fn(*args, **kwargs)
            if _program_function(fn):
                # the program's own Python function of compile-time values (a shape
                # `align(num_groups, threads)`): run now, as TileLang's builder runs it
                args = [self.value(a) for a in node.args]
                kwargs = {k.arg: self.value(k.value) for k in node.keywords}
                try:
                    return fn(*args, **kwargs)
                except Exception:       # noqa: BLE001 - device code, or not for these values
                    raise NotStatic(ast.unparse(node)) from None
        if isinstance(node, ast.IfExp):
            return self.value(node.body) if self.value(node.test) else self.value(node.orelse)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            return _CMP[type(node.ops[0])](self.value(node.left), self.value(node.comparators[0]))
        if isinstance(node, ast.BoolOp):
            # Python's: the first operand that settles it (``a or b`` is a value, not a bool)
            for v in node.values[:-1]:
                value = self.value(v)
                if bool(value) != isinstance(node.op, ast.And):
                    return value
            return self.value(node.values[-1])
        if isinstance(node, ast.Subscript):
            base = self.value(node.value)
            if isinstance(base, tuple):
                return base[self.value(node.slice)]
        raise NotStatic(ast.unparse(node))

    def shape(self, node: ast.AST) -> tuple[int, ...]:
        v = self.value(node)
        # (a numpy integer, TileLang's T.int32(64) constant, counts as the int it is)
        v = (v,) if isinstance(v, numbers.Integral) else tuple(v)
        if not v or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) and
                            x > 0 for x in v):
            raise NotStatic(f"shape {v!r}")
        return tuple(int(x) for x in v)

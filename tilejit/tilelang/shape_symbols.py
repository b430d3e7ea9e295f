"""Shapes of an eager-style program's tensors, as its source builds them.

TileLang programs build a tensor's shape before the annotation that uses it::

    M, N, K = T.const("M, N, K")
    KH, KW = K, K
    A_shape = (M, K)
    B_shape = [G, K, N] if not trans_b else [G, N, K]
    A: T.Tensor(A_shape, dtype)
    B: T.Tensor(B_shape, dtype)

``Prologue`` follows the function body's top-level assignments and substitutes them
into each annotation, so the annotation names only parameters, globals and symbols (it is
evaluated on the host before each launch, where the body's locals do not exist).
``annotation_shape`` splits a shape into its extents (a conditional shape into
conditional extents), and ``symbol_bindings`` reads each symbol from the first tensor
dimension that is the symbol itself (``K = A.shape[1]``; under a condition,
``N = B.shape[2] if not trans_b else B.shape[1]``); those statements go at the top of
the kernel's body, where every later statement may use the symbols.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.errors import CompileError
from tilejit.language.tilelang_names import LinearExtent, Symbol, SymbolicInt


class Prologue:
    """The values of the body's top-level names so far, as expressions; a name bound in a
    way not followed (in a loop, under an ``if`` with other statements) is ``unknown``."""

    def __init__(self):
        self.values: dict[str, ast.expr] = {}
        self.unknown: dict[str, tuple[str, int]] = {}   # name -> (how it is bound, line)

    def declare(self, name: str):
        """A symbol declared in the body (``M = T.const("M")``): the annotations' own."""
        self.values.pop(name, None)
        self.unknown.pop(name, None)

    def check(self, annotation: ast.expr, filename, line: int):
        """A CompileError where the (substituted) annotation reads a name the body binds
        in a way not followed: the annotation would read another value than the body's."""
        for node in syntax.walk(annotation):
            if isinstance(node, ast.Name) and node.id in self.unknown:
                how, where = self.unknown[node.id]
                raise CompileError(
                    f"{node.id!r} is assigned {how} (line {where}) before the annotation "
                    f"that uses it, which is evaluated on the host without it: compute it "
                    f"in one expression (`{node.id} = a if cond else b`) or pass it as an "
                    f"argument", filename, line)

    def substitute(self, expr: ast.expr) -> ast.expr:
        values = self.values

        class Replace(syntax.NodeTransformer):
            def visit_Name(self, node):
                if isinstance(node.ctx, ast.Load) and node.id in values:
                    return copy.deepcopy(values[node.id])
                return node

        return syntax.fix_missing_locations(Replace().visit(copy.deepcopy(expr)))

    def follow(self, stmt: ast.stmt):
        """Remember what a top-level statement binds: ``x = e`` and ``a, b = e1, e2`` by
        value; an ``if`` whose branches only assign so (``if n < 0: n = 8``) as conditional
        values (``8 if n < 0 else n``); a name bound any other way (a loop, ``+=``, a
        branch doing more) is forgotten and ``unknown``."""
        if self._assign(stmt) or self._branches(stmt):
            return
        how = {ast.If: "under an if", ast.For: "in a for loop", ast.While: "in a while loop",
               ast.With: "in a with block", ast.AugAssign: "by an augmented assignment"}.get(
            type(stmt), "by a statement the annotations do not follow")
        for name in _stored(stmt):
            self.values.pop(name, None)
            self.unknown[name] = (how, stmt.lineno)

    def _assign(self, stmt) -> bool:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return False
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name):
            self.values[target.id] = self.substitute(value)
            self.unknown.pop(target.id, None)
            return True
        if isinstance(target, (ast.Tuple, ast.List)) and \
                isinstance(value, (ast.Tuple, ast.List)) and \
                len(target.elts) == len(value.elts) and \
                all(isinstance(t, ast.Name) for t in target.elts):
            new = [self.substitute(v) for v in value.elts]
            for t, v in zip(target.elts, new):
                self.values[t.id] = v
                self.unknown.pop(t.id, None)
            return True
        return False

    def _branches(self, stmt) -> bool:
        """``if c: x = e1 else: x = e2`` (branches of assignments followed as above, nested
        ``if``s, asserts, ``pass``): each name bound as ``e1 if c else e2``, a branch that
        does not bind it giving its value before the ``if``."""
        if not isinstance(stmt, ast.If):
            return False
        sides = [self._branch(stmt.body), self._branch(stmt.orelse)]
        if None in sides:
            return False
        test = self.substitute(stmt.test)
        for name in dict.fromkeys(n for side in sides for n in side):
            before = self.values.get(name, ast.Name(name, ast.Load()))
            body, orelse = (side.get(name, before) for side in sides)
            self.values[name] = syntax.fix_missing_locations(ast.copy_location(
                ast.IfExp(copy.deepcopy(test), copy.deepcopy(body), copy.deepcopy(orelse)),
                stmt))
        return True

    def _branch(self, statements):
        """{name: value} a branch binds, or None when it does more than assign."""
        inner = Prologue()
        inner.values = dict(self.values)
        bound = set()
        for stmt in statements:
            if isinstance(stmt, (ast.Pass, ast.Assert)):
                continue
            if not (inner._assign(stmt) or inner._branches(stmt)):
                return None
            bound.update(_stored(stmt))
        return {name: inner.values[name] for name in bound}


def _stored(stmt) -> list[str]:
    """The names a statement binds in the function's scope (not in a nested function's,
    a lambda's or a comprehension's)."""
    out, stack = [], [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
            continue
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return list(dict.fromkeys(out))


def annotation_shape(annotation):
    """The extents of ``T.Tensor(shape, dt)`` or ``T.Tensor[shape, dt]``: a tuple or list
    of expressions; a conditional shape (``s1 if c else s2`` of equal ranks) gives
    conditional extents (``s1[i] if c else s2[i]``). None when the rank is not written."""
    if isinstance(annotation, ast.Call) and annotation.args:
        shape = annotation.args[0]
    elif isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple):
        shape = annotation.slice.elts[0]
    else:
        return None
    return _extents(shape)


def annotation_strides(annotation):
    """The strides of ``T.StridedTensor(shape, strides, dt)`` or ``T.StridedTensor[shape,
    strides, dt]`` (a list of expressions), or None."""
    if isinstance(annotation, ast.Call) and len(annotation.args) >= 2:
        strides = annotation.args[1]
    elif isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) \
            and len(annotation.slice.elts) >= 2:
        strides = annotation.slice.elts[1]
    else:
        return None
    return _extents(strides)


def _extents(shape):
    if isinstance(shape, (ast.Tuple, ast.List)):
        return list(shape.elts)
    if isinstance(shape, ast.IfExp):
        body, orelse = _extents(shape.body), _extents(shape.orelse)
        if body is not None and orelse is not None and len(body) == len(orelse):
            # (located: the annotations' extents are evaluated as Python)
            return [ast.copy_location(ast.IfExp(shape.test, b, o), shape)
                    for b, o in zip(body, orelse)]
        return None
    return [shape]


def _occurrences(extent, symbols, conditions=()):
    """(symbol, conditions) for each way the extent is a symbol itself: ``K``, or ``K``
    on one side of a conditional extent (with the test and the side taken)."""
    if isinstance(extent, ast.Name) and extent.id in symbols:
        yield extent.id, conditions
    elif isinstance(extent, ast.IfExp):
        yield from _occurrences(extent.body, symbols, conditions + ((extent.test, True),))
        yield from _occurrences(extent.orelse, symbols, conditions + ((extent.test, False),))


def _condition(conditions):
    tests = [copy.deepcopy(t) if taken else ast.UnaryOp(ast.Not(), copy.deepcopy(t))
             for t, taken in conditions]
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)


def symbol_bindings(annotations, symbols) -> tuple[list[ast.stmt], set[str]]:
    """``sym = tensor.shape[d]`` for each symbol some annotated extent is: the first such
    dimension, or a chain of conditional reads ending in an unconditional one (the last
    candidate's read: which symbols a given set of compile-time values leaves unbound
    is checked on the host, where the annotations are evaluated). Returns the
    statements and the symbols bound."""
    found: dict[str, list] = {}
    for tensor, annotation, line in annotations:
        for dim, extent in enumerate(annotation_shape(annotation) or ()):
            for sym, conditions in _occurrences(extent, symbols):
                found.setdefault(sym, []).append((conditions, tensor, dim, line, "shape"))
    # a symbol only a T.StridedTensor's strides name: that stride (read after the shapes)
    strided: dict[str, list] = {}
    for tensor, annotation, line in annotations:
        for dim, stride in enumerate(annotation_strides(annotation) or ()):
            for sym, conditions in _occurrences(stride, symbols):
                if sym not in found:
                    strided.setdefault(sym, []).append((conditions, tensor, dim, line,
                                                        "strides"))
    found.update(strided)
    statements = []
    for sym, candidates in found.items():
        expr = None
        for conditions, tensor, dim, _, what in reversed(candidates):
            read = ast.Subscript(ast.Attribute(ast.Name(tensor, ast.Load()), what,
                                               ast.Load()), ast.Constant(dim), ast.Load())
            expr = read if expr is None or not conditions else ast.IfExp(
                _condition(conditions), read, expr)
        line = candidates[0][3]
        stmt = ast.Assign([ast.Name(sym, ast.Store())], expr)
        for node in syntax.walk(stmt):
            node.lineno = node.end_lineno = line
            node.col_offset = node.end_col_offset = 0
        statements.append(stmt)
    return statements, set(found)


class DerivedExtent:
    """An annotated extent computed from symbols (``T.ceildiv(K, 128)``): checked once
    the symbols have their sizes."""
    is_extent = True        # an extent T.Tensor takes (language/tilelang_names._is_extent)

    def __init__(self, expr: ast.expr, filename: str):
        self.text = ast.unparse(expr)
        self.code = compile(ast.Expression(expr), filename, "eval")

    def value(self, env):
        """The extent with the symbols' sizes in ``env``; None where one is unsized."""
        try:
            return eval(self.code, env)
        except NameError:
            return None

    def __repr__(self):
        return self.text


def _computed(extent) -> bool:
    """Whether an evaluated extent is arithmetic on symbols other than ``a * n + b``."""
    return isinstance(extent, SymbolicInt) and not isinstance(extent, (Symbol, LinearExtent))


def has_computed_extents(spec) -> bool:
    """Whether an evaluated annotation has an extent ``derived_extents`` keeps as source."""
    return any(_computed(d) for d in getattr(spec, "shape", ()))


def derived_extents(annotation, env, filename):
    """The annotation evaluated with each extent that does not evaluate with the symbols
    as symbols (arithmetic other than ``a * n + b``) kept as a ``DerivedExtent``."""
    shape = annotation_shape(annotation)
    if shape is None:
        raise TypeError(f"cannot evaluate the annotation {ast.unparse(annotation)}")
    extents = []
    for extent in shape:
        try:
            value = eval(compile(ast.Expression(extent), filename, "eval"), env)
        except TypeError:
            value = None
        if value is None or _computed(value):
            value = DerivedExtent(extent, filename)
        extents.append(value)
    annotation = copy.deepcopy(annotation)
    hole = ast.Name("__tilejit_shape__", ast.Load())
    if isinstance(annotation, ast.Call):
        annotation.args[0] = hole
    else:
        annotation.slice.elts[0] = hole
    syntax.fix_missing_locations(annotation)
    return eval(compile(ast.Expression(annotation), filename, "eval"),
                dict(env, __tilejit_shape__=tuple(extents)))

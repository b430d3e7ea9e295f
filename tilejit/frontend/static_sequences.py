"""Python's lists in a helper, fixed when the kernel compiles.

TileLang runs a kernel's helper functions while it builds the kernel, so a helper's
lists are Python lists of expressions: TileLang's bf16 packing helper loops over
``[v0, v1]``, appends each half to ``res`` and returns ``res[0] | (res[1] << 16)``; its
unpacking helper returns ``(f(x) for x in [x0, x1])``, which the caller wraps in
``list(...)``. tilejit compiles a helper into the kernel, where a list cannot live (Numba
builds one on the heap), so a helper's sequences of a length known from its text become
tuples, in simulation as on the GPU (the simulator runs the same rewritten helper):

- ``for x in [a, b]`` / ``for x in (a, b)`` (and ``for i in range(4)`` whose body appends
  to such a list) is unrolled, each item bound to ``x`` in turn (the items evaluated
  first, as Python does), where the body has no ``break``/``continue`` of its own;
- ``[f(x) for x in [a, b]]``, ``(f(x) for x in (a, b))`` or over ``range(n)`` with a
  constant ``n``: the tuple ``(f(a), f(b))``;
- ``res = []`` ... ``res.append(v)``: ``res = ()`` ... ``res = res + (v,)``, where ``res`` is
  otherwise only read (indexed, passed, returned, its ``len``); an append left in a loop
  that could not be unrolled is a CompileError at its line;
- ``list(t)`` / ``tuple(t)``: ``t`` (as in the kernel's body: ``rewrite._SequenceCalls``).
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.errors import CompileError

_SEQUENCE_NAMES = ("list", "tuple")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)


def static_sequences(fdef: ast.FunctionDef, filename: str = "<helper>") -> bool:
    """Rewrite the helper ``fdef`` in place (see the module's text); whether anything
    changed. Raises CompileError for a list appended to in a loop that stays a loop."""
    lists = _appended_lists(fdef)
    rewriter = _Rewriter(fdef, lists)
    fdef.body = rewriter.statements(fdef.body)
    if lists:
        _check_no_loop_appends(fdef, lists, filename)
        _Appends(lists).visit(fdef)
    if rewriter.changed or lists:
        syntax.fix_missing_locations(fdef)
        return True
    return False


# ----------------------------------------------------------------------------------------
# the lists a helper builds by appending

def _appended_lists(fdef) -> set:
    """Names bound only to list displays and otherwise only read or appended to."""
    bound: dict = {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    ok = isinstance(node.value, ast.List) and len(node.targets) == 1 and \
                        not any(isinstance(e, ast.Starred) for e in node.value.elts)
                    bound[t.id] = bound.get(t.id, True) and ok
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With,
                               ast.NamedExpr, ast.comprehension)):
            targets = [node.target] if not isinstance(node, ast.With) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None]
            for t in targets:
                for n in syntax.walk(t):
                    if isinstance(n, ast.Name):
                        bound[n.id] = False
    names = {n for n, ok in bound.items() if ok}
    names -= {a.arg for a in fdef.args.args + fdef.args.kwonlyargs + fdef.args.posonlyargs}
    if not names:
        return set()
    statements = {id(n.value.func) for n in syntax.walk(fdef) if _append_of(n, names)}
    appended = set()
    for node in syntax.walk(fdef):
        for child in syntax.iter_child_nodes(node):
            if not (isinstance(child, ast.Name) and child.id in names):
                continue
            if isinstance(child.ctx, ast.Del):
                names.discard(child.id)
            elif isinstance(node, ast.Attribute):
                if id(node) in statements:
                    appended.add(child.id)
                else:
                    names.discard(child.id)        # extend, pop, insert, sort: left as is
            elif isinstance(node, ast.Subscript) and child is node.value and \
                    not isinstance(node.ctx, ast.Load):
                names.discard(child.id)            # res[0] = v: a list it stays
    return names & appended


def _check_no_loop_appends(fdef, lists, filename):
    for loop in syntax.walk(fdef):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        for node in syntax.walk(loop):
            if _append_of(node, lists):
                name = node.value.func.value.id
                raise CompileError(
                    f"`{ast.unparse(node)}` in a loop: a helper's list is a tuple in kernel "
                    f"code, its length fixed when the kernel compiles, so {name!r} can grow "
                    f"only in straight-line code or in a loop over a tuple literal or "
                    f"range() of constants (unrolled); keep the values in a local tile "
                    f"(T.alloc_local) instead", filename, node.lineno)


def _append_of(node, lists) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "append"
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id in lists and len(node.value.args) == 1)


class _Appends(syntax.NodeTransformer):
    """``res = [a]`` -> ``res = (a,)``; ``res.append(v)`` -> ``res = res + (v,)``."""

    def __init__(self, lists):
        self.lists = lists

    def visit_Assign(self, node):
        self.generic_visit(node)
        t = node.targets[0]
        if isinstance(t, ast.Name) and t.id in self.lists and isinstance(node.value, ast.List):
            node.value = ast.copy_location(ast.Tuple(node.value.elts, ast.Load()), node.value)
        return node

    def visit_Expr(self, node):
        self.generic_visit(node)
        if not _append_of(node, self.lists):
            return node
        name = node.value.func.value.id
        grown = ast.BinOp(ast.Name(name, ast.Load()), ast.Add(),
                          ast.Tuple([node.value.args[0]], ast.Load()))
        return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], grown), node)


# ----------------------------------------------------------------------------------------
# loops and comprehensions over sequences of known length

def _items(iterable) -> list | None:
    """The items of a tuple/list display, or of ``range`` of int constants, as nodes;
    None for anything else."""
    if isinstance(iterable, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in iterable.elts):
            return None
        return list(iterable.elts)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
            iterable.func.id == "range" and not iterable.keywords and \
            1 <= len(iterable.args) <= 3:
        bounds = [_int_constant(a) for a in iterable.args]
        if None in bounds:
            return None
        values = range(*bounds) if bounds[-1] != 0 or len(bounds) < 3 else None
        if values is None or len(values) > 64:
            return None
        return [ast.Constant(v) for v in values]
    return None


def _int_constant(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_constant(node.operand)
        return None if inner is None else -inner
    return None


def _own_exits(body) -> bool:
    """Whether ``body`` breaks or continues its own loop (not a nested loop's)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.While, *_SCOPES)):
            if isinstance(node, (ast.For, ast.While)):
                todo.extend(node.orelse)
            continue
        todo.extend(syntax.iter_child_nodes(node))
    return False


class _Substitute(syntax.NodeTransformer):
    def __init__(self, name, value):
        self.name, self.value = name, value

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.value), node)
        return node


class _Rewriter(syntax.NodeTransformer):
    def __init__(self, fdef, lists):
        self.lists = lists
        self.changed = False
        self.counter = 0
        self.shadowed = _assigned_names(fdef)

    def statements(self, body):
        out = []
        for stmt in body:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
        return out

    def visit_FunctionDef(self, node):
        return node                      # a nested function: its own scope, left as is

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _SEQUENCE_NAMES and \
                node.func.id not in self.shadowed and len(node.args) == 1 and \
                not node.keywords and not isinstance(
                    node.args[0], (ast.GeneratorExp, ast.ListComp, ast.Starred)):
            self.changed = True
            return node.args[0]
        return node

    def _comprehension(self, node):
        node = self.generic_visit(node)
        if len(node.generators) != 1:
            return node
        gen = node.generators[0]
        items = _items(gen.iter)
        if items is None or gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name) \
                or any(isinstance(n, _SCOPES) for n in syntax.walk(node.elt)):
            return node
        self.changed = True
        elts = [_Substitute(gen.target.id, item).visit(copy.deepcopy(node.elt))
                for item in items]
        return ast.copy_location(ast.Tuple(elts, ast.Load()), node)

    visit_GeneratorExp = visit_ListComp = _comprehension

    def visit_For(self, node):
        node.body = self.statements(node.body)
        node.orelse = self.statements(node.orelse)
        node.iter = self.visit(node.iter)
        items = _items(node.iter)
        if items is None or node.orelse or _own_exits(node.body):
            return node
        if isinstance(node.iter, ast.Call) and not any(
                _append_of(n, self.lists) for n in syntax.walk(ast.Module(node.body, []))):
            return node         # a range() loop stays a loop unless it builds a list
        self.changed = True
        out = []
        held = []
        for item in items:
            if isinstance(item, ast.Constant):
                held.append(item)
                continue
            name = f"__tj_item{self.counter}"
            self.counter += 1
            out.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], item),
                                         node))
            held.append(ast.Name(name, ast.Load()))
        for value in held:
            out.append(ast.copy_location(
                ast.Assign([copy.deepcopy(node.target)], copy.deepcopy(value)), node))
            out.extend(copy.deepcopy(node.body))
        return out


def _assigned_names(fdef) -> set:
    names = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs + fdef.args.posonlyargs}
    names |= {n.id for n in syntax.walk(fdef)
              if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return names

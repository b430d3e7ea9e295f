"""Python's lists in a helper, fixed when the kernel compiles.

TileLang runs a kernel's helper functions while it builds the kernel, so a helper's
lists are Python lists of expressions: TileLang's bf16 packing helper loops over
``[v0, v1]``, appends each half to ``res`` and returns ``res[0] | (res[1] << 16)``; its
unpacking helper returns ``(f(x) for x in [x0, x1])``, which the caller wraps in
``list(...)``. tilejit compiles a helper into the kernel, where a list cannot live (Numba
builds one on the heap), so a helper's sequences of a length known from its text become
tuples, in simulation as on the GPU (the simulator runs the same rewritten helper):

- ``for x in [a, b]`` / ``for x in (a, b)``, over ``zip``/``enumerate`` of those (and
  ``for i in range(4)`` whose body changes such a list) is unrolled, each item bound to
  ``x`` in turn (the items evaluated first, as Python does), where the body has no
  ``break``/``continue`` of its own;
- ``[f(x) for x in [a, b]]``, ``(f(x) for x in (a, b))`` (with ``if`` conditions on the
  items that are constants' once the item is put in: ``if k % 2 == 0``) or over
  ``range(n)`` with a
  constant ``n`` (or ``zip``/``enumerate`` of those): the tuple ``(f(a), f(b))``;
- ``res = [a, b]`` (or ``[]``, or ``list(t)``: a copy) is a tuple, where ``res`` is
  otherwise only read (indexed, passed, returned, its ``len``) or changed by
  ``res.append(v)``, ``res.extend(s)``/``res += s`` (``res = res + (v,)``, ``res + s``) or
  ``res[k] = v`` at an index ``k`` known from the text (the tuple rebuilt); such a change
  left in a loop that could not be unrolled, or at another index, is a CompileError at
  its line; ``return [a, b]`` returns the tuple;
- ``[x] * 3`` of names and constants: the display repeated; ``sum``, ``max`` and
  ``min`` of a known sequence: its items folded (``0 + a + b``, ``max(a, b)``: Numba's
  device code has no sum of a sequence); ``reversed`` of one: its items reversed;
- ``list(t)`` / ``tuple(t)``: ``t`` (as in the kernel's body: ``rewrite._SequenceCalls``),
  unless the helper or its module binds the name to something of its own.
"""
from __future__ import annotations

import ast
import builtins
import copy

from tilejit import syntax
from tilejit.errors import CompileError

_SEQUENCE_NAMES = ("list", "tuple")
_ITERATORS = ("range", "zip", "enumerate", "reversed")     # over displays: items known too
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)


def static_sequences(fdef: ast.FunctionDef, filename: str = "<helper>",
                     namespace: dict | None = None) -> bool:
    """Rewrite the helper ``fdef`` in place (see the module's text); whether anything
    changed. Raises CompileError for a list appended to in a loop that stays a loop.
    ``namespace``: the helper's globals, where a ``list``/``tuple`` of the user's own is
    not the builtin (its calls are left as they are)."""
    shadowed = {n for n in _SEQUENCE_NAMES + _ITERATORS + ("sum", "max", "min")
                if (namespace or {}).get(n, builtins.__dict__[n]) is not builtins.__dict__[n]}
    shadowed |= _assigned_names(fdef)
    repeats = _Repeats()
    repeats.visit(fdef)
    lists = _static_lists(fdef, shadowed)
    rewriter = _Rewriter(lists, shadowed)
    fdef.body = rewriter.statements(fdef.body)
    if lists:
        _check_no_loop_updates(fdef, lists, filename)
        _Updates(lists, shadowed, filename).visit(fdef)
    if rewriter.changed or lists or repeats.changed:
        syntax.fix_missing_locations(fdef)
        return True
    return False


# ----------------------------------------------------------------------------------------
# the lists a helper builds

def _static_lists(fdef, shadowed) -> set:
    """Names bound only to list displays (or to ``list(t)``: a copy, which a tuple is as
    well as a list) and otherwise only read or changed by the statements ``_update_of``
    knows; one read-only counts too (kernel code cannot build a list, even to read it)."""
    bound: dict = {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    ok = len(node.targets) == 1 and _list_value(node.value, shadowed)
                    bound[t.id] = bound.get(t.id, True) and ok
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With,
                               ast.NamedExpr, ast.comprehension)):
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and \
                    isinstance(node.target, ast.Name):
                continue                        # res += [v]: an update (_update_of)
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
    updates = [n for n in syntax.walk(fdef) if _update_of(n, names)]
    methods = {id(n.value.func) for n in updates if isinstance(n, ast.Expr)}
    items = {id(n.targets[0]) for n in updates if isinstance(n, ast.Assign)}
    for node in syntax.walk(fdef):
        for child in syntax.iter_child_nodes(node):
            if not (isinstance(child, ast.Name) and child.id in names):
                continue
            if isinstance(child.ctx, ast.Del):
                names.discard(child.id)
            elif isinstance(node, ast.Attribute) and id(node) not in methods:
                names.discard(child.id)            # pop, insert, sort: left as is
            elif isinstance(node, ast.Subscript) and child is node.value and \
                    not isinstance(node.ctx, ast.Load) and id(node) not in items:
                names.discard(child.id)            # res[0] += v, del res[0]: a list it stays
            elif isinstance(node, ast.AugAssign) and child is node.target and \
                    not _update_of(node, names):
                names.discard(child.id)
    return names


def _list_value(node, shadowed) -> bool:
    """A list display (no ``*``) or ``list(t)`` (the builtin)."""
    if isinstance(node, ast.List):
        return not any(isinstance(e, ast.Starred) for e in node.elts)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "list" and "list" not in shadowed and len(node.args) == 1 and \
        not node.keywords and not isinstance(node.args[0], ast.Starred)


def _check_no_loop_updates(fdef, lists, filename):
    for loop in syntax.walk(fdef):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        for node in syntax.walk(loop):
            if _update_of(node, lists):
                raise CompileError(
                    f"`{ast.unparse(node)}` in a loop: a helper's list is a tuple in kernel "
                    f"code, its length and items fixed when the kernel compiles, so "
                    f"{_updated_name(node)!r} can change only in straight-line code or in a "
                    f"loop over a tuple literal or range() of constants (unrolled); keep "
                    f"the values in a local tile (T.alloc_local) instead", filename,
                    node.lineno)


def _updated_name(node) -> str:
    if isinstance(node, ast.Expr):
        return node.value.func.value.id
    target = node.target if isinstance(node, ast.AugAssign) else node.targets[0]
    return target.id if isinstance(target, ast.Name) else target.value.id


def _update_of(node, lists) -> bool:
    """``res.append(v)``, ``res.extend(s)``, ``res += s`` (``s`` a display or a name) or
    ``res[k] = v`` of a list in ``lists``."""
    if isinstance(node, ast.Expr):
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id in lists
                and len(call.args) == 1 and not call.keywords):
            return False
        if call.func.attr == "append":
            return not isinstance(call.args[0], ast.Starred)
        return call.func.attr == "extend" and _extension(call.args[0]) is not None
    if isinstance(node, ast.AugAssign):
        return isinstance(node.target, ast.Name) and node.target.id in lists and \
            isinstance(node.op, ast.Add) and _extension(node.value) is not None
    return isinstance(node, ast.Assign) and len(node.targets) == 1 and \
        isinstance(node.targets[0], ast.Subscript) and \
        isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id in lists \
        and not isinstance(node.targets[0].slice, ast.Slice)


def _extension(node):
    """What ``res.extend(node)`` / ``res += node`` adds to the tuple ``res``, as a tuple
    expression; None for anything but a display or a name (another helper's list)."""
    if isinstance(node, (ast.List, ast.Tuple)) and \
            not any(isinstance(e, ast.Starred) for e in node.elts):
        return ast.Tuple(node.elts, ast.Load())
    return node if isinstance(node, ast.Name) else None


class _Updates(syntax.NodeTransformer):
    """``res = [a]`` -> ``res = (a,)``, ``list(t)`` -> ``t``; ``res.append(v)`` -> ``res =
    res + (v,)``, ``res.extend(s)`` / ``res += s`` -> ``res = res + s``; ``res[k] = v`` ->
    ``res = res[:k] + (v,) + res[k:][1:]`` after a read of ``res[k]`` (Python's IndexError,
    Numba's typing error: the tuple does not grow), ``k`` an int known from the text."""

    def __init__(self, lists, shadowed, filename):
        self.lists, self.shadowed, self.filename = lists, shadowed, filename

    def visit_Assign(self, node):
        self.generic_visit(node)
        t = node.targets[0]
        if isinstance(t, ast.Name) and t.id in self.lists and \
                _list_value(node.value, self.shadowed):
            value = node.value
            node.value = ast.copy_location(ast.Tuple(value.elts, ast.Load()), value) \
                if isinstance(value, ast.List) else value.args[0]
            return node
        if not _update_of(node, self.lists):
            return node
        index = _int_value(t.slice)
        if index is None:
            raise CompileError(
                f"`{ast.unparse(node)}`: a helper's list is a tuple in kernel code, so its "
                f"item can be replaced only at an index known when the kernel compiles (an "
                f"int, or the variable of a loop over range() of constants)", self.filename,
                node.lineno)
        name = t.value.id
        k = ast.Constant(index)
        read = ast.Subscript(ast.Name(name, ast.Load()), copy.deepcopy(k), ast.Load())
        rest = ast.Subscript(ast.Subscript(ast.Name(name, ast.Load()), ast.Slice(k, None),
                                           ast.Load()), ast.Slice(ast.Constant(1), None),
                             ast.Load())
        head = ast.Subscript(ast.Name(name, ast.Load()), ast.Slice(None, copy.deepcopy(k)),
                             ast.Load())
        value = ast.BinOp(ast.BinOp(head, ast.Add(), ast.Tuple([node.value], ast.Load())),
                          ast.Add(), rest)
        return [ast.copy_location(ast.Expr(read), node),
                ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), node)]

    def visit_Expr(self, node):
        self.generic_visit(node)
        if not _update_of(node, self.lists):
            return node
        call = node.value
        added = ast.Tuple([call.args[0]], ast.Load()) if call.func.attr == "append" else \
            _extension(call.args[0])
        return self._grown(call.func.value.id, added, node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if not _update_of(node, self.lists):
            return node
        return self._grown(node.target.id, _extension(node.value), node)

    @staticmethod
    def _grown(name, added, node):
        grown = ast.BinOp(ast.Name(name, ast.Load()), ast.Add(), added)
        return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], grown), node)


def _int_value(node):
    """The int an index of constants and arithmetic on them is (``2``, ``-1``, ``0 + 1``
    once a loop is unrolled); None for anything else."""
    if not all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator,
                              ast.unaryop)) for n in syntax.walk(node)):
        return None
    if any(isinstance(n, ast.Constant) and type(n.value) is not int
           for n in syntax.walk(node)):
        return None
    try:
        value = eval(compile(ast.Expression(node), "<index>", "eval"),  # noqa: S307
                     {"__builtins__": {}})
    except Exception:       # noqa: BLE001 - 1 // 0: not an index known from the text
        return None
    return value if type(value) is int else None


# ----------------------------------------------------------------------------------------
# loops and comprehensions over sequences of known length

def _items(iterable, shadowed=frozenset()) -> list | None:
    """The items of a tuple/list display, of ``range`` of int constants, or of ``zip`` /
    ``enumerate`` of those (tuples), as nodes; None for anything else (or where the helper
    or its module binds the name: ``shadowed``)."""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
            iterable.func.id in shadowed:
        return None
    if isinstance(iterable, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in iterable.elts):
            return None
        return list(iterable.elts)
    if _call_of(iterable, "reversed") and len(iterable.args) == 1:
        items = _items(iterable.args[0], shadowed)
        return None if items is None else items[::-1]
    if _call_of(iterable, "enumerate") and len(iterable.args) == 1:
        items = _items(iterable.args[0], shadowed)
        return None if items is None else \
            [ast.Tuple([ast.Constant(i), item], ast.Load()) for i, item in enumerate(items)]
    if _call_of(iterable, "zip") and iterable.args:
        columns = [_items(a, shadowed) for a in iterable.args]
        return None if None in columns else \
            [ast.Tuple(list(row), ast.Load()) for row in zip(*columns)]
    if _range_call(iterable) and 1 <= len(iterable.args) <= 3:
        bounds = [_int_constant(a) for a in iterable.args]
        if None in bounds:
            return None
        values = range(*bounds) if bounds[-1] != 0 or len(bounds) < 3 else None
        if values is None or len(values) > 64:
            return None
        return [ast.Constant(v) for v in values]
    return None


def _call_of(node, name) -> bool:
    """``name(...)`` with positional arguments only (the builtin unless the helper binds
    the name: ``shadowed`` is checked where it is rewritten)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == name and not node.keywords and \
        not any(isinstance(a, ast.Starred) for a in node.args)


def _range_call(node) -> bool:
    return _call_of(node, "range")


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
    """Each name read that ``values`` maps, its value (all at once: one's value may read
    another's name)."""

    def __init__(self, values: dict):
        self.values = values

    def visit_Name(self, node):
        if node.id in self.values and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.values[node.id]), node)
        return node


class _Repeats(syntax.NodeTransformer):
    """Run first, so that ``zs = [0.0] * 3`` is a list display the rest reads."""

    def __init__(self):
        self.changed = False

    def visit_BinOp(self, node):
        """``[x] * 3`` (or ``3 * [x]``) of names and constants: the display repeated."""
        node = self.generic_visit(node)
        if not isinstance(node.op, ast.Mult):
            return node
        for seq, count in ((node.left, node.right), (node.right, node.left)):
            n = _int_constant(count)
            if isinstance(seq, (ast.List, ast.Tuple)) and n is not None and 0 <= n <= 64 and \
                    all(isinstance(e, (ast.Name, ast.Constant)) for e in seq.elts):
                self.changed = True
                elts = [copy.deepcopy(e) for _ in range(n) for e in seq.elts]
                return ast.copy_location(type(seq)(elts, ast.Load()), node)
        return node


class _Rewriter(syntax.NodeTransformer):
    def __init__(self, lists, shadowed):
        self.lists = lists
        self.changed = False
        self.counter = 0
        self.shadowed = shadowed

    def statements(self, body):
        out = []
        for stmt in body:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
        return out

    def visit_FunctionDef(self, node):
        return node                      # a nested function: its own scope, left as is

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Return(self, node):
        """``return [a, b]``: the tuple, which its caller reads as it would the list."""
        node = self.generic_visit(node)
        if isinstance(node.value, ast.List) and \
                not any(isinstance(e, ast.Starred) for e in node.value.elts):
            self.changed = True
            node.value = ast.copy_location(ast.Tuple(node.value.elts, ast.Load()), node.value)
        return node

    def _folded(self, node):
        """``sum([a, b])`` as ``0 + a + b``, ``max([a, b])`` as ``max(a, b)`` (and of the
        other known sequences): Numba's device code has no sum or max of a sequence."""
        name = node.func.id
        items = _items(node.args[0], self.shadowed)
        if items is None or not items or name in self.shadowed:
            return None
        self.changed = True
        if name != "sum":
            return ast.Call(ast.Name(name, ast.Load()), items, []) if len(items) > 1 \
                else items[0]
        out = ast.Constant(0)
        for item in items:
            out = ast.BinOp(out, ast.Add(), item)
        return out

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if _call_of(node, "sum") and len(node.args) == 1 or (
                (_call_of(node, "max") or _call_of(node, "min")) and len(node.args) == 1):
            folded = self._folded(node)
            if folded is not None:
                return ast.copy_location(folded, node)
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
        items = _items(gen.iter, self.shadowed)
        if items is None or gen.is_async or \
                any(isinstance(n, _SCOPES) for n in syntax.walk(node.elt)):
            return node
        if isinstance(gen.target, ast.Name):
            pairs = [{gen.target.id: item} for item in items]
        elif isinstance(gen.target, ast.Tuple) and all(
                isinstance(t, ast.Name) for t in gen.target.elts) and all(
                isinstance(i, ast.Tuple) and len(i.elts) == len(gen.target.elts) and
                not any(isinstance(e, ast.Starred) for e in i.elts) for i in items):
            # `for i, v in enumerate([a, b])`: each name the item's part
            pairs = [{t.id: e for t, e in zip(gen.target.elts, item.elts)} for item in items]
        else:
            return node
        if gen.ifs:
            # `if k % 2 == 0`: kept where each item's condition is a constant's
            keep = [_constant_truth(_Substitute(values).visit(copy.deepcopy(cond)))
                    for values in pairs for cond in gen.ifs]
            if None in keep:
                return node
            n = len(gen.ifs)
            pairs = [v for k, v in enumerate(pairs) if all(keep[k * n:(k + 1) * n])]
        self.changed = True
        elts = [_Substitute(values).visit(copy.deepcopy(node.elt)) for values in pairs]
        return ast.copy_location(ast.Tuple(elts, ast.Load()), node)

    visit_GeneratorExp = visit_ListComp = _comprehension

    def visit_For(self, node):
        node.body = self.statements(node.body)
        node.orelse = self.statements(node.orelse)
        node.iter = self.visit(node.iter)
        items = _items(node.iter, self.shadowed)
        if items is None or node.orelse or _own_exits(node.body):
            return node
        if _range_call(node.iter) and not any(
                _update_of(n, self.lists) for n in syntax.walk(ast.Module(node.body, []))):
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
        # a constant item stands for a target the body only reads (`res[k] = v` needs it)
        body = ast.Module(node.body, [])
        name = node.target.id if isinstance(node.target, ast.Name) and \
            node.target.id not in _assigned_names(body) and \
            not any(isinstance(n, _SCOPES) for n in syntax.walk(body)) else None
        for value in held:
            out.append(ast.copy_location(
                ast.Assign([copy.deepcopy(node.target)], copy.deepcopy(value)), node))
            body = copy.deepcopy(node.body)
            if name is not None and isinstance(value, ast.Constant):
                body = [_Substitute({name: value}).visit(stmt) for stmt in body]
            out.extend(body)
        return out


def _constant_truth(expr):
    """The truth of an expression of constants only (``2 % 2 == 0``), or None."""
    if any(isinstance(n, (ast.Name, ast.Call, ast.Attribute, ast.Subscript, ast.Lambda,
                          ast.NamedExpr, *_SCOPES)) for n in syntax.walk(expr)):
        return None
    try:
        value = eval(compile(syntax.fix_missing_locations(ast.Expression(expr)),  # noqa: S307
                             "<condition>", "eval"), {"__builtins__": {}})
    except Exception:       # noqa: BLE001 - not a constant's: left to the compile
        return None
    return bool(value)


def _assigned_names(tree) -> set:
    """The names ``tree`` (a function: its parameters too) binds."""
    names = set()
    if isinstance(tree, ast.FunctionDef):
        args = tree.args
        names = {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs}
    names |= {n.id for n in syntax.walk(tree)
              if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return names

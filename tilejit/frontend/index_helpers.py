"""Front end: an index a plain Python helper builds, ``y[coords(r, c)] = x[coords(r, c)]``
with ``def coords(r, c): return (r // 2, r % 2, c)``: Python hands the subscript the
helper's tuple, so the index is that tuple, the call's arguments in the parameters'
places (a graph compiler's layer norm indexes its N-d tensors so). A helper whose body
is one ``return`` of a tuple (or list) of expressions of its parameters (and of names the
kernel sees alike) is spelled out by substitution; any other is run as TileLang runs it
while it builds the program: its compile-time arguments (a shape tuple of the closure)
as values, each other one a stand-in symbol whose arithmetic (``+ - * // %``) is
recorded, and the tuple it returns written with the arguments in the stand-ins' places.
A helper that branches on a stand-in, or returns anything but a tuple of integers and
such expressions, leaves the call as it was."""
from __future__ import annotations

import ast
import copy
import inspect

from tilejit import syntax
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import SubstituteLoads, function_def_from_file, resolve_static
from tilejit.language.tilelang_names import Symbol, SymbolicInt


def _tuple_helper(fn):
    """(parameters, defaults, the returned tuple) of a helper whose body is one ``return``
    of a tuple, else None."""
    if not inspect.isfunction(fn):
        return None
    found = function_def_from_file(fn)
    if not found:
        return None
    fdef = found[1]
    body = [s for s in fdef.body if not (isinstance(s, ast.Expr)
                                         and isinstance(s.value, ast.Constant))]
    a = fdef.args
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(
            body[0].value, (ast.Tuple, ast.List)) or a.vararg or a.kwarg or a.kwonlyargs \
            or a.posonlyargs:
        return None
    return [p.arg for p in a.args], list(a.defaults), body[0].value


class _Spell(syntax.NodeTransformer):
    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        call = node.slice
        if not isinstance(call, ast.Call) or call.keywords or any(
                isinstance(a, ast.Starred) for a in call.args):
            return node
        try:
            fn = resolve_static(call.func, self.namespace)
        except TypeError:
            return node
        helper = _tuple_helper(fn)
        if helper is None:
            return self._traced(node, fn, call)
        params, defaults, returned = helper
        given = list(call.args) + [copy.deepcopy(d) for d in defaults][
            len(call.args) - (len(params) - len(defaults)):]
        if len(call.args) > len(params) or len(given) != len(params):
            return node
        own = current_namespace(fn)
        free = {n.id for n in syntax.walk(returned) if isinstance(n, ast.Name)} - set(params)
        if any(self.namespace.get(n, own.get(n)) is not own.get(n) for n in free):
            return node     # (a name the kernel sees as something else)
        index = SubstituteLoads(dict(zip(params, given))).visit(copy.deepcopy(returned))
        node.slice = ast.copy_location(ast.Tuple(list(index.elts), ast.Load()), call)
        return syntax.fix_missing_locations(node)


    def _statements(self, body):
        """``coordinates = helper(...)`` then ``out[coordinates]``, ``x[coordinates]`` in
        the statements after it: each index the helper's tuple, as written where the
        name is read (while neither it nor the call's names are bound again there)."""
        out = []
        for k, stmt in enumerate(body):
            stmt = self.visit(stmt)
            out.append(stmt)
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
                continue
            name = stmt.targets[0].id
            probe = self.visit(ast.Subscript(ast.Name("__tj_probe", ast.Load()),
                                             copy.deepcopy(stmt.value), ast.Load()))
            if not isinstance(probe.slice, ast.Tuple):
                continue
            read = {n.id for n in syntax.walk(stmt.value) if isinstance(n, ast.Name)}
            rest = body[k + 1:]
            if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                   and n.id in read | {name} for r in rest for n in syntax.walk(r)):
                continue
            stmt.value = probe.slice
            for r in rest:
                for n in syntax.walk(r):
                    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) \
                            and n.slice.id == name:
                        n.slice = copy.deepcopy(probe.slice)
        return out

    def generic_visit(self, node):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(node, field, self._statements(value))
            elif isinstance(value, list):
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v
                                      for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
        return node

    def _traced(self, node, fn, call):
        if not inspect.isfunction(fn) or not function_def_from_file(fn):
            return node
        values, stand_ins = [], {}
        for k, arg in enumerate(call.args):
            names = {n.id for n in syntax.walk(arg) if isinstance(n, ast.Name)}
            if names and not names & self.assigned and names <= set(self.namespace):
                try:
                    values.append(eval(compile(ast.Expression(arg), "<index>", "eval"),  # noqa: S307
                                       {"__builtins__": {}}, dict(self.namespace)))
                    continue
                except Exception:   # noqa: BLE001 - not a compile-time value after all
                    pass
            elif not names and isinstance(arg, ast.Constant):
                values.append(arg.value)
                continue
            symbol = Symbol(f"__tj_index_arg{k}")
            stand_ins[symbol.name] = arg
            values.append(symbol)
        try:
            result = fn(*values)
        except Exception:           # noqa: BLE001 - a branch on a stand-in, or the helper's
            return node             # own error: the call stays (and is reported later)
        if not isinstance(result, (tuple, list)) or not all(
                isinstance(e, SymbolicInt) or (isinstance(e, int) and not isinstance(e, bool))
                for e in result):
            return node
        elts = [e.to_ast(lambda sym: copy.deepcopy(stand_ins[sym.name]))
                if isinstance(e, SymbolicInt) else ast.Constant(e) for e in result]
        node.slice = ast.copy_location(ast.Tuple(elts, ast.Load()), call)
        return syntax.fix_missing_locations(node)


def spell_index_helpers(ks) -> None:
    """``ks.tree`` with each index a tuple-building helper gives written out (in place)."""
    if not any(isinstance(n, ast.Subscript) and isinstance(n.slice, (ast.Call, ast.Name))
               for n in syntax.walk(ks.tree)):
        return
    spell = _Spell(ks.namespace)
    spell.assigned = {n.id for n in syntax.walk(ks.tree) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Store)} | {a.arg for a in ks.tree.args.args}
    ks.tree = spell.visit(ks.tree)

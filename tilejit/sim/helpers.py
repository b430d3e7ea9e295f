"""Helpers and ``@T.macro``s in the simulator: their integer operators in the GPU's types.

On the GPU a helper a kernel calls (a plain function, or a ``@T.macro``) is compiled
from its bytecode as a device function (``codegen/macros.py``), so Numba types its ``+ -
*``, ``& | ^`` and shifts as the kernel's own (64-bit arithmetic, C's bitwise types).
Run as plain Python in the simulator, it would compute in numpy's types instead (``int8
+ int8`` wraps in int8). The simulator therefore runs each helper the kernel names
through the same rewrite as the kernel (``transform._CIntegerOps``, its parameters
variables, as a device function's are) and the lane-wise forms of its expressions
(``transform.LaneExpressions``: a helper called in a T.Parallel body gets lane arrays,
``x - y if x > y else 0.0`` selects lane by lane), compiled from the helper's own
source, with its own globals and closure, and the helpers it names in turn; a value's
``x.astype(dtype)`` there is ``T.cast`` for numbers and arrays (a loop index is a Python
int here, a typed integer there), as in the kernel's own body. A helper whose source
cannot be read (a lambda, one typed at a prompt) runs as it is."""
from __future__ import annotations

import ast
import weakref

import numpy as np

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import function_def_from_file, resolve_static
from tilejit.sim import runtime
from tilejit.sim.transform import SIM, LaneExpressions, _CIntegerOps, _LaneWise

_BUILT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ASTYPE = "__tj_astype"
_BUILDING: set = set()


def simulated_helpers(namespace: dict, names) -> None:
    """Each of ``names`` bound in ``namespace`` to a helper or a macro, rebound to its
    simulated version."""
    for name in names:
        value = namespace.get(name)
        if isinstance(value, T.macro) or is_helper(value):
            namespace[name] = simulated_helper(value)


def simulated_helper(obj):
    fn = obj.func if isinstance(obj, T.macro) else obj
    if not is_helper(fn) or fn in _BUILDING:
        return obj
    built = _BUILT.get(fn)
    if built is not None:
        return built
    found = function_def_from_file(fn)
    if not found:
        return obj
    filename, fdef = found
    own = current_namespace(fn)
    if any(not _is_macro_decorator(d, own) for d in fdef.decorator_list):
        return obj          # another decorator: what it does is its own (run as it is)
    fdef.decorator_list = []
    fdef = _Raises().visit(_CIntegerOps(fdef).visit(fdef))
    if _branching_value_helper(fdef):
        fdef.body = _single_exit(fdef)
        lanes = _LaneWise()
    else:
        lanes = LaneExpressions()
    fdef = syntax.fix_missing_locations(_Astype().visit(lanes.visit(fdef)))
    namespace = own
    namespace[SIM] = runtime
    namespace[_ASTYPE] = _astype
    _BUILDING.add(fn)
    try:
        simulated_helpers(namespace, {n.id for n in syntax.walk(fdef)
                                      if isinstance(n, ast.Name)})
        exec(compile(ast.Module([fdef], []), filename, "exec"), namespace)
    finally:
        _BUILDING.discard(fn)
    built = namespace[fdef.name]
    built.__defaults__ = fn.__defaults__
    built.__kwdefaults__ = fn.__kwdefaults__
    _BUILT[fn] = built
    return built


def _is_macro_decorator(node, namespace) -> bool:
    return resolve_static(node, namespace) is T.macro


class _Astype(syntax.NodeTransformer):
    """``x.astype(dtype)`` → ``__tj_astype(x, dtype)``."""

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype" and \
                len(node.args) == 1 and not node.keywords:
            return ast.copy_location(ast.Call(ast.Name(_ASTYPE, ast.Load()),
                                              [node.func.value, node.args[0]], []), node)
        return node


def _astype(value, dtype):
    """A helper's ``value.astype(dtype)``: ``T.cast`` of a number or an array (what the
    GPU's typed value does), the value's own ``astype`` otherwise (TIR's expressions)."""
    if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        return T.cast(value, dtype)
    return value.astype(dtype)


# -- a helper that branches on its values (``if x < 0: return 0``) ------------------------
_RET, _DONE = "__tj_ret", "__tj_done"


def _branching_value_helper(fdef) -> bool:
    """A helper returning a value whose ``if`` statements may branch lane by lane: its
    branches run masked as a T.Parallel body's (``transform._LaneWise``), its returns
    made one exit. Not one with a return inside a loop, or a ``with`` (a macro's tile
    operations run for the block: its branches stay Python's). ``raise`` and ``assert``
    act where a lane reaches them in every helper (``_Raises``)."""
    nodes = list(syntax.walk(fdef))
    if not any(isinstance(n, ast.If) for n in nodes) or \
            not any(isinstance(n, ast.Return) and n.value is not None for n in nodes):
        return False
    if any(isinstance(n, (ast.With, ast.FunctionDef, ast.Try)) and n is not fdef
           for n in nodes):
        return False
    return not any(isinstance(n, (ast.For, ast.While)) and
                   any(isinstance(r, ast.Return) for r in syntax.walk(n)) for n in nodes)


def _assign(name, value):
    return ast.Assign([ast.Name(name, ast.Store())], value)


def _single_exit(fdef) -> list:
    """The helper's body with one return at its end: each ``return v`` sets the result
    and marks the lanes done; the statements after a branch that returned run for the
    lanes not done; ``raise`` and ``assert`` act only where a lane reaches them."""
    body, _ = _exits(fdef.body)
    scope = ast.With([ast.withitem(_sim_call("helper_scope", []), None)], [
        _assign(_RET, ast.Constant(None)), _assign(_DONE, ast.Constant(False)), *body])
    return [ast.copy_location(scope, fdef.body[0]), ast.Return(ast.Name(_RET, ast.Load()))]


def _exits(stmts):
    out = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            value = stmt.value if stmt.value is not None else ast.Constant(None)
            out += [ast.copy_location(_assign(_RET, value), stmt),
                    ast.copy_location(_assign(_DONE, ast.Constant(True)), stmt)]
            return out, True
        if isinstance(stmt, ast.If):
            stmt.body, a = _exits(stmt.body)
            stmt.orelse, b = _exits(stmt.orelse) if stmt.orelse else ([], False)
            out.append(stmt)
            if a or b:
                rest, _ = _exits(stmts[i + 1:])
                if rest:
                    out.append(ast.copy_location(ast.If(ast.UnaryOp(
                        ast.Not(), ast.Name(_DONE, ast.Load())), rest, []), stmt))
                return out, True
            continue
        out.append(stmt)
    return out, False


class _Raises(syntax.NodeTransformer):
    """``raise`` and ``assert`` act only where a lane reaches them (``runtime.
    raise_where_active`` / ``assert_where_active``): one value, as Python's; lanes,
    those the mask leaves active."""

    def visit_Raise(self, node):
        exc = node.exc if node.exc is not None else ast.Constant(None)
        return ast.copy_location(ast.Expr(_sim_call("raise_where_active", [exc])), node)

    def visit_Assert(self, node):
        msg = node.msg if node.msg is not None else ast.Constant("")
        return ast.copy_location(ast.Expr(_sim_call("assert_where_active", [
            self.visit(node.test), msg])), node)


def _sim_call(name, args):
    return ast.Call(ast.Attribute(ast.Name(SIM, ast.Load()), name, ast.Load()), args, [])

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
import inspect
import weakref

import numpy as np

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import function_def_from_file, resolve_static
from tilejit.frontend.static_sequences import static_sequences
from tilejit.frontend.thread_tests import dependent_names
from tilejit.sim import runtime
from tilejit.sim.transform import (SIM, LaneExpressions, _CIntegerOps, _LaneWise,
                                   tuple_names)

_CODE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # fn -> _Code or None
_ASTYPE = "__tj_astype"
_HELPER = "__tj_helper"


class _Code:
    """A helper's simulated form, compiled once: the module code that defines it, the
    names it reads (helpers among them are simulated too), and whether it runs lane by
    lane (``_per_lane``)."""

    def __init__(self, code, name, names, chains, per_lane):
        self.code, self.name, self.names = code, name, names
        self.chains, self.per_lane = chains, per_lane


def simulated_helpers(namespace: dict, names, built=None) -> None:
    """Each of ``names`` bound in ``namespace`` to a helper or a macro, rebound to its
    simulated version. ``built``: the versions made for this kernel so far (a helper is
    made once per kernel, in the globals it reads now: a global rebound since another
    kernel was simulated is read as the GPU's compilation reads it)."""
    built = {} if built is None else built
    for name in names:
        value = namespace.get(name)
        if isinstance(value, T.macro) or is_helper(value):
            namespace[name] = simulated_helper(value, built)


def simulated_helper(obj, built=None):
    fn = obj.func if isinstance(obj, T.macro) else obj
    built = {} if built is None else built
    if not is_helper(fn):
        return obj
    if fn in built:
        return built[fn]
    if fn not in _CODE:
        _CODE[fn] = _compile(fn)
    code = _CODE[fn]
    if code is None:
        return obj
    namespace = current_namespace(fn)
    namespace[SIM] = runtime
    namespace[_ASTYPE] = _astype
    built[fn] = obj         # a helper that calls itself: the call runs it as it is
    simulated_helpers(namespace, code.names, built)
    bind_attribute_helpers(namespace, code.chains, built)
    exec(code.code, namespace)
    made = namespace[code.name]
    made.__defaults__ = fn.__defaults__
    made.__kwdefaults__ = fn.__kwdefaults__
    if code.per_lane:
        made = _per_lane(made, fn.__name__, code.per_lane)
    built[fn] = made
    return made


def _compile(fn):
    found = function_def_from_file(fn)
    if not found:
        return None
    filename, fdef = found
    own = current_namespace(fn)
    if any(not _is_macro_decorator(d, own) for d in fdef.decorator_list):
        return None         # another decorator: what it does is its own (run as it is)
    fdef.decorator_list = []
    static_sequences(fdef, filename, own)    # its lists as the compiled helper's tuples
    fdef = _Raises().visit(_CIntegerOps(fdef).visit(fdef))
    per_lane = _lane_dependent_control(fdef)
    tuples = tuple_names(fdef, own)
    if _branching_value_helper(fdef):
        fdef.body = _single_exit(fdef)
        lanes = _LaneWise(tuples)
    elif _branching_void_helper(fdef):
        fdef.body = [ast.copy_location(ast.With([ast.withitem(
            _sim_call("helper_scope", []), None)], fdef.body), fdef.body[0])]
        lanes = _LaneWise(tuples)
    else:
        lanes = LaneExpressions(tuples)
    attributes = AttributeHelpers(own)
    fdef = attributes.visit(fdef)
    fdef = syntax.fix_missing_locations(_Astype().visit(lanes.visit(fdef)))
    names = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)}
    code = compile(ast.Module([fdef], []), filename, "exec")
    return _Code(code, fdef.name, names, attributes.chains, per_lane)


class AttributeHelpers(syntax.NodeTransformer):
    """A helper called through a module or an object (``ops.relu(x)``, ``cfg.act(x)``)
    called by a name of its own (``__tj_helper<k>``; ``chains``: each name's attribute
    chain), which the simulator binds to its simulated version
    (``bind_attribute_helpers``): a bare name's helper is rebound in the namespace, an
    attribute's would run as plain Python."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.chains = {}

    def visit_Call(self, node):
        node = self.generic_visit(node)
        chain = _chain(node.func)
        if chain is not None and len(chain) > 1:
            target = resolve_static(node.func, self.namespace)
            if isinstance(target, T.macro) or is_helper(target):
                name = f"{_HELPER}{len(self.chains)}"
                self.chains[name] = chain
                node.func = ast.copy_location(ast.Name(name, ast.Load()), node.func)
        return node


def _chain(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def bind_attribute_helpers(namespace, chains, built=None) -> None:
    """Each name of ``chains`` bound to the simulated helper its attribute chain names in
    ``namespace`` now."""
    built = {} if built is None else built
    for name, chain in chains.items():
        target = namespace.get(chain[0])
        for attr in chain[1:]:
            target = getattr(target, attr, None)
        if target is not None:
            namespace[name] = simulated_helper(target, built)


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


def _lane_dependent_control(fdef) -> tuple:
    """The parameters whose values a helper's control flow reads where masks cannot
    follow it: a loop's bounds, a ``while``'s test, the test of a branch that leaves a
    loop (``break``, ``continue``, ``return``), directly or through the names computed
    from them. Called with a lane array for one of these, the helper runs one lane at a
    time (``_per_lane``; a T.Parallel handing it one runs one iteration at a time:
    ``transform._calls_lane_by_lane``); with one value for every lane (a bound of 16, a
    tile's shape), as it is. Empty for a macro's tile code (a ``with``: its branches are
    the block's)."""
    nodes = list(syntax.walk(fdef))
    if any(isinstance(n, (ast.With, ast.FunctionDef, ast.Try)) and n is not fdef
           for n in nodes):
        return ()
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
    control = _control_expressions(fdef)
    if not control:
        return ()
    reads = set()
    for expr in control:
        reads |= {n.id for n in syntax.walk(expr) if isinstance(n, ast.Name)}
    # (a helper's own source never calls the front end's thread index: the names each
    # parameter's value flows into)
    return tuple(p for p in params if dependent_names(fdef, {p}) & reads)


def _control_expressions(fdef) -> list:
    out = []

    def visit(stmts, in_loop):
        for stmt in stmts:
            if isinstance(stmt, ast.For):
                out.append(stmt.iter)
                visit(stmt.body, True)
                visit(stmt.orelse, in_loop)
            elif isinstance(stmt, ast.While):
                out.append(stmt.test)
                visit(stmt.body, True)
                visit(stmt.orelse, in_loop)
            elif isinstance(stmt, ast.If):
                if in_loop and any(isinstance(n, (ast.Break, ast.Continue, ast.Return))
                                   for s in stmt.body + stmt.orelse for n in syntax.walk(s)):
                    out.append(stmt.test)
                visit(stmt.body, in_loop)
                visit(stmt.orelse, in_loop)
    visit(fdef.body, False)
    return out


def control_parameters(obj) -> tuple:
    """The parameters of helper (or macro) ``obj`` that decide, lane by lane, what its
    control flow does (``_lane_dependent_control``); empty when none, or not a helper."""
    fn = obj.func if isinstance(obj, T.macro) else obj
    if not is_helper(fn):
        return ()
    if fn not in _CODE:
        _CODE[fn] = _compile(fn)
    return _CODE[fn].per_lane if _CODE[fn] is not None else ()


def _is_lanes(value) -> bool:
    return isinstance(value, np.ndarray) and value.ndim > 0


def _per_lane(made, name, control):
    """``made`` called once per active lane with that lane's values where a lane array (a
    T.Parallel's index arrays, per-thread code's lanes) reaches one of the ``control``
    parameters, its results reassembled into lane arrays (a tuple's items each); as it is
    otherwise. Tensors and tiles pass as they are (every lane's same one)."""
    signature = inspect.signature(made)

    def run(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return made(*args, **kwargs)        # (Python's own error, as the call would)
        if not any(_is_lanes(bound.get(p)) for p in control):
            return made(*args, **kwargs)
        lanes = [v for v in list(args) + list(kwargs.values()) if _is_lanes(v)]
        mask = runtime.STATE.mask
        shape = np.broadcast_shapes(*(v.shape for v in lanes),
                                    *(() if mask is None else (np.shape(mask),)))
        active = np.broadcast_to(True if mask is None else mask, shape)
        spread = [np.broadcast_to(v, shape) if _is_lanes(v) else None for v in args]
        kspread = {k: np.broadcast_to(v, shape) for k, v in kwargs.items() if _is_lanes(v)}
        results = {}
        runtime.STATE.mask = None       # one lane, active, at a time
        try:
            for at in np.ndindex(shape):
                if active[at]:
                    a = [s[at] if s is not None else v for s, v in zip(spread, args)]
                    k = {n: kspread[n][at] if n in kspread else v for n, v in kwargs.items()}
                    results[at] = made(*a, **k)
        finally:
            runtime.STATE.mask = mask
        return _reassembled(results, shape)
    run.__name__ = name
    return run


def _reassembled(results, shape):
    if not results:
        return None
    first = next(iter(results.values()))
    if first is None:
        return None
    if isinstance(first, tuple):
        return tuple(_reassembled({at: r[k] for at, r in results.items()}, shape)
                     for k in range(len(first)))
    # the type every lane's value takes (Numba unifies a helper's returns: an int
    # `return 0` beside a float `return x * 0.5` is a float)
    out = np.zeros(shape, dtype=np.result_type(*results.values()))
    for at, r in results.items():
        out[at] = r
    return out


def _branching_void_helper(fdef) -> bool:
    """A helper that returns nothing and branches (``if v > 0: C[i] = v``): its branches
    run masked, as a T.Parallel body's (only a final bare ``return``)."""
    nodes = list(syntax.walk(fdef))
    if not any(isinstance(n, ast.If) for n in nodes):
        return False
    if any(isinstance(n, (ast.With, ast.FunctionDef, ast.Try)) and n is not fdef
           for n in nodes):
        return False
    returns = [n for n in nodes if isinstance(n, ast.Return)]
    return all(r.value is None for r in returns) and (
        not returns or (len(returns) == 1 and fdef.body[-1] is returns[0]))


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

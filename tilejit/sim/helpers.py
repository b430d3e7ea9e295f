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
from tilejit.sim.transform import SIM, LaneExpressions, _CIntegerOps

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
    fdef = _CIntegerOps(fdef).visit(fdef)
    fdef = syntax.fix_missing_locations(_Astype().visit(LaneExpressions().visit(fdef)))
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

"""TileLang's generic reduction, ``T.reduce(buffer, out, reduce_type, dim, clear)``,
rewritten on the kernel's tree before anything else reads it (``source.parse_kernel``)
into the reduction it names: ``T.reduce(S, r, "max", 1, True)`` →
``T.reduce_max(S, r, dim=1, clear=True)``. The kind is one of TileLang's ``ReduceKind``
strings (``sum``, ``max``, ``min``, ``abssum``, ``absmax``) or a bitwise one
(``bitand``, ``bitor``, ``bitxor``), written as a string or a name the kernel's module
binds to one; anything else, a kernel parameter (a ``T.constexpr`` among them) or a
name the kernel binds itself included, is a ``CompileError`` at the call's line."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static
from tilejit.ir.markers import LANGUAGE

KINDS = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")
_PARAMS = ("buffer", "out", "reduce_type", "dim", "clear")


class _Reduces(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks
        # names the kernel binds itself: their values are not known when it is parsed
        self.own = set(ks.params) | assigned_names(ks.tree)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if resolve_static(node.func, self.ks.namespace) is not T.reduce:
            return node
        values = dict(zip(_PARAMS, node.args))
        for kw in node.keywords:
            if kw.arg not in _PARAMS or kw.arg in values:
                raise self.ks.error(f"T.reduce({', '.join(_PARAMS)}): unexpected or repeated "
                                    f"argument {kw.arg!r}", node)
            values[kw.arg] = kw.value
        missing = [p for p in _PARAMS if p not in values]
        if len(node.args) > len(_PARAMS) or missing:
            raise self.ks.error(f"T.reduce({', '.join(_PARAMS)}) takes these five arguments"
                                + (f"; {', '.join(missing)} missing" if missing else ""), node)
        kind = values["reduce_type"]
        own = {n.id for n in syntax.walk(kind) if isinstance(n, ast.Name)} & self.own
        name = kind.value if isinstance(kind, ast.Constant) else \
            None if own else resolve_static(kind, self.ks.namespace)
        if not isinstance(name, str) or name.lower() not in KINDS:
            why = (f" ({', '.join(sorted(own))}: the kernel's own, not known when it is "
                   f"parsed; a T.constexpr kind picks T.reduce_<kind> under an `if`)"
                   if own else "")
            raise self.ks.error(f"T.reduce: reduce_type must be one of {', '.join(KINDS)} "
                                f"written as a string, got `{ast.unparse(kind)}`{why}", node)
        if isinstance(node.func, ast.Attribute):        # T.reduce
            module = node.func.value
        else:                                           # from ... import reduce
            self.ks.namespace.setdefault(LANGUAGE, T)
            module = ast.Name(LANGUAGE, ast.Load())
        func = ast.copy_location(ast.Attribute(module, f"reduce_{name.lower()}", ast.Load()),
                                 node.func)
        return ast.copy_location(ast.Call(func, [values["buffer"], values["out"]],
                                          [ast.keyword("dim", values["dim"]),
                                           ast.keyword("clear", values["clear"])]), node)


def rewrite_generic_reduces(ks: KernelSource) -> None:
    """Every ``T.reduce(...)`` in ``ks.tree`` made the ``T.reduce_<kind>`` it names."""
    ks.tree = syntax.fix_missing_locations(_Reduces(ks).visit(ks.tree))

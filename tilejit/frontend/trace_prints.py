"""Python's ``print(...)`` written in a kernel, as TileLang has it: Python that runs
once, when the program is traced (parsed), not on the device. TileLang's users print
a block index or a tile size there while they debug (its issue 830's kernels hold
``print(pid)``); each such statement prints once when the kernel's source is parsed,
its compile-time values (constants, the parameters a ``@tilelang.jit`` factory binds)
as values and the rest (a block index, an element) as their source text, the
symbolic form TileLang shows, and leaves the device program. A device-side print is
``T.print``. A ``print`` used as a value (``x = print(...)``) stays an error
(``validate.py``)."""
from __future__ import annotations

import ast
import builtins

from tilejit import syntax
from tilejit.frontend.source import KernelSource, resolve_static

_PLAIN = (bool, int, float, str)


def _shown(node: ast.AST, namespace: dict) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = resolve_static(node, namespace)
        if isinstance(value, _PLAIN) or type(value).__name__ == "DType":
            return value
    return ast.unparse(node)


def _is_print(stmt: ast.stmt, namespace: dict) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
        resolve_static(stmt.value.func, namespace) is builtins.print


class _TracePrints(syntax.NodeTransformer):
    def __init__(self, namespace):
        self.namespace = namespace
        self.lines = []

    def visit_Expr(self, node):
        if not _is_print(node, self.namespace):
            return node
        call = node.value
        if any(isinstance(a, ast.Starred) for a in call.args):
            return node             # print(*xs): left to validate.py's error
        kw = {k.arg: _shown(k.value, self.namespace) for k in call.keywords}
        sep = kw.get("sep", " ")
        end = kw.get("end", "\n")
        text = (sep if isinstance(sep, str) else " ").join(
            str(_shown(a, self.namespace)) for a in call.args)
        self.lines.append(text + (end if isinstance(end, str) else "\n"))
        return ast.copy_location(ast.Pass(), node)


def run_trace_time_prints(ks: KernelSource) -> None:
    """Print each ``print(...)`` statement of the kernel now, and drop it."""
    if not any(isinstance(n, ast.Name) and n.id == "print" for n in syntax.walk(ks.tree)):
        return
    tracer = _TracePrints(ks.namespace)
    ks.tree = syntax.fix_missing_locations(tracer.visit(ks.tree))
    for line in tracer.lines:
        print(line, end="")

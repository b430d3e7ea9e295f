"""Questions a kernel's body asks the host about the device, such as
``sm_num = driver.get_num_sms()`` written before ``with T.Kernel`` in an eager-style
program: compile-time values of each specialization.

A function is a host query when it carries ``__tilejit_host_query__ = True``
(``carver/arch/driver.get_num_sms``). The host program calls it as Python (the grid);
in the device program each call becomes the global ``__tj_host_<line>_<column>``, whose
value the runtime computes before compiling (``host_query_values``) and adds to the
specialization's compile-time values, so the disk cache keys each answer apart (a
kernel compiled on a 114-SM GPU is never reused on a 132-SM one). The simulator's
program calls the function itself.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import KernelSource, resolve_static


def is_host_query(fn) -> bool:
    return getattr(fn, "__tilejit_host_query__", False) is True


def _name(call: ast.Call) -> str:
    return f"__tj_host_{call.lineno}_{call.col_offset}"


def host_query_calls(ks: KernelSource) -> list[ast.Call]:
    """The host-query calls of the kernel's device program (not the launch's extents,
    which only the host program computes)."""
    launch_args = {id(n) for item in ks.launch.items for n in syntax.walk(item.context_expr)}
    return [node for node in syntax.walk(ks.tree)
            if isinstance(node, ast.Call) and id(node) not in launch_args
            and is_host_query(resolve_static(node.func, ks.namespace))]


def host_query_values(ks: KernelSource, calls) -> tuple:
    """((global name, value), …) of ``calls``, each asked now."""
    out = []
    for call in calls:
        args = call.args + [k.value for k in call.keywords]
        if not all(isinstance(a, ast.Constant) for a in args):
            raise ks.error(f"`{ast.unparse(call)}` in a kernel body is asked on the host before "
                           "compiling: its arguments must be constants", call)
        fn = resolve_static(call.func, ks.namespace)
        value = fn(*[a.value for a in call.args],
                   **{k.arg: k.value.value for k in call.keywords})
        out.append((_name(call), value))
    return tuple(out)


class _Replace(syntax.NodeTransformer):
    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if is_host_query(resolve_static(node.func, self.namespace)):
            return ast.copy_location(ast.Name(_name(node), ast.Load()), node)
        return node


def replace_host_queries(fdef: ast.FunctionDef, namespace) -> ast.FunctionDef:
    """The device program with each host-query call read from its global."""
    return _Replace(namespace).visit(fdef)

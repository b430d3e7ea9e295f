"""Reject, before typing, Python constructs a kernel cannot contain, with the line."""
from __future__ import annotations

import ast
import copy
import builtins
import difflib

from tilejit import language as _language
from tilejit.frontend.reducers import rewrite_reducers, uses_reducers
from tilejit.language import compat as _compat
from tilejit.frontend.explicit_sync import is_ws
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.frontend.static_prologue import is_prologue_value

UNSUPPORTED = {
    ast.Try: "try/except", ast.Raise: "raise (use T.device_assert)",
    ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
    ast.AsyncFor: "async for", ast.AsyncWith: "async with",
    ast.Lambda: "lambda", ast.FunctionDef: "a nested def (use @T.macro)",
    ast.ClassDef: "a class definition", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression", ast.Global: "global",
    ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.JoinedStr: "an f-string",
    ast.Dict: "a dict", ast.Set: "a set", ast.List: "a list",
    ast.Import: "import", ast.ImportFrom: "import", ast.Assert: "assert (use T.device_assert)",
}
if hasattr(ast, "TryStar"):
    UNSUPPORTED[ast.TryStar] = "try/except*"


def check_supported(ks: KernelSource) -> None:
    launch = ks.launch
    # reducers: folds and finalize batches checked when the kernel is made, as TileLang does
    if uses_reducers(ks.tree, ks.namespace):
        rewrite_reducers(copy.deepcopy(ks.tree), dict(ks.namespace), ks.error)
    # a list or dict written as a call's argument is a compile-time value: a tile shape
    # `[block_M, dim]`, the mapping of T.annotate_layout
    call_args = {id(a) for node in ast.walk(ks.tree) if isinstance(node, ast.Call)
                 for a in node.args + [k.value for k in node.keywords]
                 if isinstance(a, (ast.List, ast.Dict))}
    # T.alloc_barrier([128, 128] * stages): the arrival counts, compile-time too
    call_args |= {id(n) for node in ast.walk(ks.tree) if isinstance(node, ast.Call)
                  and resolve_static(node.func, ks.namespace) is _language.alloc_barrier
                  for a in node.args + [k.value for k in node.keywords]
                  for n in ast.walk(a) if isinstance(n, ast.List)}
    # a layout (T.annotate_layout's dict, a T.Layout): a compile-time value, evaluated as
    # Python (passes/user_layouts.py), so its function may be a lambda
    call_args |= {id(n) for node in ast.walk(ks.tree) if isinstance(node, ast.Call)
                  and resolve_static(node.func, ks.namespace) in (_language.annotate_layout,
                                                                 _language.Layout,
                                                                 _language.Fragment)
                  for a in node.args + [k.value for k in node.keywords] for n in ast.walk(a)}
    # a value computed before `with T.Kernel(...)`: folded at compile time where it can be
    # (static_prologue.py), which reports what stays unsupported
    call_args |= {id(n) for stmt in ks.tree.body[:max(ks.launch_index, 0)]
                  if is_prologue_value(stmt) for n in ast.walk(stmt.value)}
    for index, stmt in enumerate(ks.tree.body):
        # host code's asserts, at the top or in its `if` blocks (their messages may be
        # f-strings): the host program checks them; rewrite.device_tree drops them
        host_asserts = {id(n) for a in ast.walk(stmt) if isinstance(a, ast.Assert)
                        for n in ast.walk(a)} if index < ks.launch_index else set()
        for node in ast.walk(stmt):
            if id(node) in host_asserts:
                continue
            if id(node) in call_args and type(node) in UNSUPPORTED:
                continue
            what = UNSUPPORTED.get(type(node))
            if what is not None:
                raise ks.error(f"unsupported in a kernel: {what}", node)
            if isinstance(node, ast.Attribute) and not hasattr(_language, node.attr) \
                    and resolve_static(node.value, ks.namespace) is _language:
                raise ks.error(_unknown_language_name(node), node)
            if isinstance(node, ast.Call) and \
                    resolve_static(node.func, ks.namespace) is builtins.print:
                raise ks.error("unsupported in a kernel: print() (use T.print(value, msg), "
                               "which prints a number: a scalar, or one element such as "
                               "A[i] or tile[i, j])", node)
            if isinstance(node, ast.With) and node is not launch and not is_ws(node,
                                                                              ks.namespace):
                raise ks.error("unsupported in a kernel: a `with` block other than "
                               "`with T.Kernel(...)` and `with T.ws(...)`", node)
            if isinstance(node, ast.While) and node.orelse or (
                    isinstance(node, ast.For) and node.orelse):
                raise ks.error("unsupported in a kernel: a loop's `else` clause", node)


def _unknown_language_name(node: ast.Attribute) -> str:
    """``T.no_such_prim``: the name as written, and the closest names the language has;
    for one of TileLang's names that tilejit does not have, that it is not supported."""
    prefix = ast.unparse(node.value)
    why = _compat.reason(node.attr)
    if why is not None:
        return _compat.message(node.attr, why, alias=prefix)
    close = difflib.get_close_matches(node.attr, [n for n in dir(_language)
                                                  if not n.startswith("_")], n=3)
    hint = f"; did you mean {', '.join(f'{prefix}.{c}' for c in close)}?" if close else ""
    return (f"unknown name {prefix}.{node.attr}: tilejit.language has no "
            f"{node.attr!r}{hint}")

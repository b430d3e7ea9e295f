"""Which of the block's threads take a branch on the thread index: the names a kernel
binds to its thread index (``tx = T.get_thread_binding()``) and the threads for which a
test such as ``tx < 128`` or ``tx >= 128 and tx < 256`` holds, evaluated for each thread
of the block. The front end's role rewrite (``thread_roles.py``) and the passes that map
tile operations onto ranges of threads (``passes/thread_branches.py``) and check
``setmaxnreg`` budgets (``passes/register_budget.py``) read branches through these.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.ir.markers import THREAD_INDEX


def thread_names(fdef) -> dict:
    """{name: its value} of the names assigned once from the block's thread index
    (``tx = T.get_thread_binding()``, the front end's ``__tj_thread_index()``, with
    ``% x`` or ``// x % y`` in a block of several dimensions) and constants only."""
    out, stores = {}, {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and _of_thread_index(node.value):
            out[node.targets[0].id] = node.value
    return {n: v for n, v in out.items() if stores.get(n) == 1}


def _of_thread_index(expr) -> bool:
    calls = [n for n in syntax.walk(expr) if isinstance(n, ast.Call)]
    return bool(calls) and all(isinstance(c.func, ast.Name) and c.func.id == THREAD_INDEX
                               and not c.args for c in calls) and all(
        isinstance(n, (ast.Call, ast.Name, ast.Constant, ast.BinOp, ast.operator, ast.Load))
        for n in syntax.walk(expr))


_TID = "__tj_tid"


class _IndexCalls(syntax.NodeTransformer):
    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == THREAD_INDEX and not node.args:
            return ast.copy_location(ast.Name(_TID, ast.Load()), node)
        return self.generic_visit(node)


def thread_takers(test, names, threads, namespace):
    """The threads for which ``test`` holds, or None when it is not a comparison of the
    thread index (``names``: {name: its value}) with compile-time values."""
    # `T.get_thread_binding() < 32` written in the test itself: the index as a name
    test = _IndexCalls().visit(copy.deepcopy(test))
    names = {**names, _TID: syntax.fix_missing_locations(ast.Expression(
        ast.Call(ast.Name(THREAD_INDEX, ast.Load()), [], []))).body}
    used = {n.id for n in syntax.walk(test) if isinstance(n, ast.Name)}
    if not used & set(names) or any(isinstance(n, (ast.Call, ast.Subscript, ast.Attribute))
                                    for n in syntax.walk(test)):
        return None
    env = {}
    for n in used - set(names):
        value = namespace.get(n)
        if not isinstance(value, (int, float, bool)):
            return None
        env[n] = value
    code = compile(syntax.fix_missing_locations(ast.Expression(test)), "<test>", "eval")
    values = {n: compile(syntax.fix_missing_locations(ast.Expression(copy.deepcopy(v))),
                         "<thread index>", "eval") for n, v in names.items() if n in used}
    try:
        takers = []
        for t in range(threads):
            index = {THREAD_INDEX: lambda t=t: t}
            local = {**env, **{n: eval(v, {"__builtins__": {}}, index)  # noqa: S307
                               for n, v in values.items()}}
            if eval(code, {"__builtins__": {}}, local):                   # noqa: S307
                takers.append(t)
        return takers
    except Exception:       # not a plain comparison: left to the simulator
        return None


def reads_thread(tree, names) -> bool:
    """Whether ``tree`` reads one of ``names`` or the thread index itself."""
    return any(isinstance(n, ast.Name) and n.id in names or isinstance(n, ast.Call)
               and isinstance(n.func, ast.Name) and n.func.id == THREAD_INDEX
               for n in syntax.walk(tree))


def dependent_names(fdef, names=()) -> set:
    """``names`` and every name assigned (a loop's variable too), directly or through
    others, from them or the thread index."""
    names, changed = set(names), True
    while changed:
        changed = False
        for node in syntax.walk(fdef):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.For):
                value, targets = node.iter, [node.target]
            else:
                continue
            if value is None or not reads_thread(value, names):
                continue
            for t in targets:
                for n in syntax.walk(t):
                    if isinstance(n, ast.Name) and n.id not in names:
                        names.add(n.id)
                        changed = True
    return names

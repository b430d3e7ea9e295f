"""The statements before ``with T.Kernel(...)`` that compute compile-time values.

TileLang runs a program's prologue in Python while it builds the kernel, so programs
write ordinary Python there::

    num_stages = 2
    mbarrier_list = [128, 128] * num_stages
    total_m_blocks = sum(ceildiv(size, block_M) for size in batch_sizes_list)
    q_shape = [batch, seq_len, heads, dim]

In tilejit the prologue runs twice: on the host (``rewrite.host_tree``: plain Python,
before each launch) and in the device program, which Numba types. There a list, a
comprehension or a call to a Python function cannot be compiled; but a prologue
assignment whose value depends only on compile-time values (the constexpr parameters,
globals, constants, earlier such assignments) has one value for the whole
specialization. ``fold_static_prologue`` computes it and writes it into the device
program as a constant (a list as a tuple); a value of another kind (a dtype, a
function) becomes a global of the device program. A chained assignment of a constant
(``micro_size_x = micro_size_y = 16``) and a tuple unpacked name by name (``batch, seq_len,
heads, dim = Q.shape`` once its compile-time entries are specialized) fold name by name,
and an ``if`` whose test is a
compile-time value is replaced by the branch it takes. What still is not compilable after
that is reported as before, at its line (``validate.UNSUPPORTED``).
"""
from __future__ import annotations

import ast

from tilejit import syntax
import builtins


def is_prologue_value(stmt: ast.stmt) -> bool:
    """An assignment of one name: what the folding may compute."""
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name))


def constant_ast(value):
    """The AST of a number, string, bool, None or (nested) tuple/list of them; None when
    the value is of another kind."""
    # exact types only: a dtype is a str subclass, and a numpy scalar keeps its dtype as
    # a global of the program (an int constant would be int64)
    if value is None or type(value) in (bool, str, int, float):
        return ast.Constant(value)
    if isinstance(value, (tuple, list)):
        elts = [constant_ast(v) for v in value]
        if any(e is None for e in elts):
            return None
        return ast.Tuple(elts, ast.Load())
    return None


def fold_static_prologue(prologue: list, body_after: list, namespace: dict,
                         unsupported: dict, error, runtime_params=()) -> list:
    """The prologue with each compile-time assignment folded (see the module's text);
    ``namespace`` (the device program's globals) gains the values that are not
    constants. ``runtime_params`` are the program's run-time parameters (never
    compile-time, whatever global shares a name with them). ``error(message, node)``
    makes the error for what stays unsupported."""
    assigned: dict[str, int] = {}
    for node in syntax.walk(ast.Module(prologue + body_after, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned[node.id] = assigned.get(node.id, 0) + 1
    runtime: set[str] = set(runtime_params)   # names with run-time values
    env = {k: v for k, v in namespace.items() if k not in runtime}
    out = []
    pending = list(prologue)
    while pending:
        stmt = pending.pop(0)
        if isinstance(stmt, ast.If):
            # `if out_dtype == T.int32: micro_size_k = 32`: a compile-time test takes its
            # branch, whose statements fold as the prologue's own
            taken, ok = evaluate_static(stmt.test, env, runtime)
            if ok:
                pending[:0] = stmt.body if taken else stmt.orelse
                continue
        if _is_unpacking(stmt):
            # `batch, seq_len, heads, dim = (Q.shape[0], ..., <dim's compile-time value>)`
            # (a shape unpacked, its compile-time entries specialized): one assignment per
            # name, so the compile-time ones fold and what is computed from them too
            pending[:0] = [syntax.fix_missing_locations(ast.copy_location(
                ast.Assign([ast.Name(t.id, ast.Store())], v), stmt))
                for t, v in zip(stmt.targets[0].elts, stmt.value.elts)]
            continue
        if _is_chained(stmt):
            # `micro_size_x = micro_size_y = micro_size_k = 16`: one assignment per name
            value, ok = evaluate_static(stmt.value, env, runtime)
            if ok and constant_ast(value) is not None:
                pending[:0] = [syntax.fix_missing_locations(ast.copy_location(
                    ast.Assign([ast.Name(t.id, ast.Store())], constant_ast(value)), stmt))
                               for t in stmt.targets]
                continue
        if is_prologue_value(stmt):
            name = stmt.targets[0].id
            value, ok = evaluate_static(stmt.value, env, runtime)
            if ok:
                env[name] = value
                constant = constant_ast(value)
                if constant is not None:
                    out.append(ast.copy_location(
                        ast.Assign([ast.Name(name, ast.Store())], constant), stmt))
                    continue
                if assigned.get(name) == 1:      # bound once: a global of the program
                    namespace[name] = value
                    continue
            else:
                runtime.add(name)
        else:
            for node in syntax.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    runtime.add(node.id)
        for node in syntax.walk(stmt):
            what = unsupported.get(type(node))
            if what is not None:
                raise error(f"unsupported in a kernel: {what} (a statement before `with "
                            f"T.Kernel(...)` may use one when it depends only on compile-time "
                            f"values: the constexpr parameters, globals and constants)", node)
        out.append(stmt)
    return out


def _is_unpacking(stmt) -> bool:
    """``a, b = (x, y)`` whose values read none of the names it assigns."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple)
            and len(stmt.targets[0].elts) == len(stmt.value.elts)
            and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts)):
        return False
    names = {t.id for t in stmt.targets[0].elts}
    return len(names) == len(stmt.targets[0].elts) and not any(
        isinstance(n, ast.Name) and n.id in names for n in syntax.walk(stmt.value))


def _is_chained(stmt) -> bool:
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) > 1
            and all(isinstance(t, ast.Name) for t in stmt.targets))


def evaluate_static(expr, env, runtime):
    """(value, True) when ``expr`` reads only names with compile-time values."""
    for node in syntax.walk(expr):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and (
                node.id in runtime or node.id not in env and not _builtin(node.id)):
            bound_inside = any(isinstance(n, (ast.comprehension,)) and
                               any(isinstance(t, ast.Name) and t.id == node.id
                                   for t in syntax.walk(n.target))
                               for n in syntax.walk(expr))
            if not bound_inside:
                return None, False
    try:
        return eval(compile(ast.Expression(expr), "<prologue>", "eval"), env), True
    except Exception:
        return None, False


def _builtin(name: str) -> bool:
    """The names a compile-time value may use without binding them (len, sum, range)."""
    return hasattr(builtins, name)

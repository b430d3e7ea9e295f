"""Front end: the grid extents a kernel's launch fixes at compile time.

``with T.Kernel(T.ceildiv(M, 128), T.ceildiv(N, 256)) as (bx, by)`` whose extents are
arithmetic of compile-time numbers (literals, integer globals, closure constants,
constexpr parameters, the shape entries the kernel is specialized on, prologue names
folded to constants) launches the same grid every call the compiled kernel serves: the
host computes it from the same values, and a change of any of them compiles another
kernel. Only such arithmetic counts: an extent read from a dict or a list, an attribute
or a program's function may change while the kernel is reused, and is not fixed. The
device program then reads each block index with its extent
(``__tj_block_index(axis, extent)``): the GPU's read carries LLVM range metadata
``[0, extent)``, so a bounds test such as TileLang's safe-memory guard
``by * 128 + i < 8192`` folds away where the tile never passes the edge (were the launch
ever to differ, the range would be a lie the GPU acts on)"""
from __future__ import annotations

import ast
import builtins
import copy
import math
import numbers

from tilejit import language as T
from tilejit import syntax
from tilejit.frontend.source import KernelSource, kernel_call, resolve_static
from tilejit.frontend.static_prologue import evaluate_static

# the most a grid dimension may be (CUDA's x limit; y and z are smaller)
_MAX_EXTENT = 2 ** 31 - 1


def static_grid(ks: KernelSource, prologue: list, namespace: dict, runtime_names,
                specialize) -> list:
    """Per grid axis, its extent when compile-time, else None ([] without a plain
    ``T.Kernel`` launch). ``prologue``: the host statements before the launch, folded;
    ``runtime_names``: the run-time parameters and outputs; ``specialize``: a transformer
    that turns the specialized ``P.shape[d]`` into their constants' names."""
    call = kernel_call(ks)
    if resolve_static(call.func, ks.namespace) is not T.Kernel:
        return []
    assigned: dict[str, int] = {}
    constants: dict = {}
    for stmt in prologue:
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned[node.id] = assigned.get(node.id, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Constant):
            constants[stmt.targets[0].id] = stmt.value.value
    runtime = set(runtime_names) | {n for n, count in assigned.items()
                                    if count > 1 or n not in constants}
    env = {k: v for k, v in namespace.items() if k not in runtime}
    env.update({n: v for n, v in constants.items() if n not in runtime})
    out = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            return []
        arg = specialize.visit(copy.deepcopy(arg))
        if not _keyed(arg, env, runtime, ks.namespace):
            out.append(None)
            continue
        value, ok = evaluate_static(arg, env, runtime)
        ok = ok and isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and 0 < value <= _MAX_EXTENT
        out.append(int(value) if ok else None)
    return out


# the functions an extent may call: pure, of numbers
_PURE = (T.ceildiv, builtins.min, builtins.max, builtins.int, math.ceil, math.floor)
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _keyed(expr, env, runtime, namespace) -> bool:
    """Whether ``expr`` is arithmetic of numbers the compiled kernel is keyed on, through
    pure functions: not an element of a dict or a list, an attribute or a program's
    function, which may give another value at the next call while the kernel is reused."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Name):
        value = env.get(expr.id)
        return expr.id not in runtime and isinstance(value, numbers.Real) and \
            not isinstance(value, bool)
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, _OPERATORS) and \
            _keyed(expr.left, env, runtime, namespace) and \
            _keyed(expr.right, env, runtime, namespace)
    if isinstance(expr, ast.UnaryOp):
        return isinstance(expr.op, ast.USub) and _keyed(expr.operand, env, runtime, namespace)
    if isinstance(expr, ast.Call):
        return not expr.keywords and any(resolve_static(expr.func, namespace) is f
                                         for f in _PURE) and \
            all(_keyed(a, env, runtime, namespace) for a in expr.args)
    return False


__all__ = ["static_grid"]

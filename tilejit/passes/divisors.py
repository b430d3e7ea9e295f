"""Pass: an integer division or remainder by a divisor that is zero at compile time is an
error at its line.

On the GPU an integer ``//`` or ``%`` by zero gives an unspecified value (PTX ``div`` and
``rem`` define none); numpy in the simulator gives 0 with a warning. Neither is an answer,
so a divisor that the compile-time values make 0 (a ``T.constexpr`` passed as 0, a shape
entry the kernel is specialized on, arithmetic of them) stops the compile for both, naming
the expression and the values it was computed from. A true division ``/`` is left alone
(floating point: ±inf or NaN, as IEEE defines and the simulator computes). It runs after the
compile-time ``if``s are folded, so a division in a branch a constexpr turns off (``if d
> 0: ... // d``) is not one. Divisors known only at run time are the kernel's to guard.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.passes.static_eval import StaticEval


def check_divisors(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    for node in syntax.walk(fdef):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            divisor = node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            divisor = node.value
        else:
            continue
        try:
            value = static.value(divisor)
        except Exception:                 # NotStatic, or not evaluable at compile time
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            names = sorted({n.id for n in syntax.walk(divisor) if isinstance(n, ast.Name)})
            given = ", ".join(f"{n}={ctx.namespace[n]!r}" for n in names if n in ctx.namespace
                              and isinstance(ctx.namespace[n], (int, float)))
            op = "//" if isinstance(node.op, ast.FloorDiv) else "%"
            raise ctx.error(f"integer {op} by zero: `{ast.unparse(divisor)}` is 0 at compile "
                            f"time{f' (with {given})' if given else ''}; the GPU gives no "
                            f"defined value for it", node)
    return fdef

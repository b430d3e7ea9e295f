"""What the passes that turn a tile operation into the element loop it means share
(``global_copies.py``, ``fragment_regions.py``, ``safe_values.py``, ``transposes.py``):
recognising a plain ``T.copy(src, dst)`` statement, building ``for i, j in
T.Parallel(e0, e1): <body>`` and the test that an element lies inside its tensor."""
from __future__ import annotations

import ast
import copy

from tilejit import language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import LANGUAGE, REGION


def copy_operands(stmt: ast.Expr, namespace: dict):
    """(src, dst) of a statement ``T.copy(src, dst)`` with no options, else None."""
    call = stmt.value
    if isinstance(call, ast.Call) and resolve_static(call.func, namespace) is T.copy \
            and len(call.args) == 2 and not call.keywords:
        return tuple(call.args)
    return None


def is_region(node) -> bool:
    """``__tj_region(X, kinds, starts, ends, extents)``: a region operand of a named tile or
    tensor, as the front end writes ``X[r0:r1, c]``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == REGION and isinstance(node.args[0], ast.Name))


def index(elts: list) -> ast.expr:
    """A subscript's index: the one expression, or their tuple."""
    return elts[0] if len(elts) == 1 else ast.Tuple(elts, ast.Load())


def parallel_loop(names: list, extents: list, body: list) -> ast.For:
    """``for <names> in T.Parallel(<extents>): <body>``."""
    target = (ast.Name(names[0], ast.Store()) if len(names) == 1 else
              ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store()))
    parallel = ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "Parallel", ast.Load()),
                        [e if isinstance(e, ast.AST) else ast.Constant(e) for e in extents],
                        [])
    return ast.For(target, parallel, body, [], None)


def inside_tensor(name, elts):
    """``0 <= i < X.shape[0] and …`` for the indices of tensor ``name``."""
    tests = [ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()], [
        copy.deepcopy(e), ast.Subscript(ast.Attribute(ast.Name(name, ast.Load()), "shape",
                                                      ast.Load()), ast.Constant(d), ast.Load())])
        for d, e in enumerate(elts)]
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)


def known_shape(ctx, name) -> tuple | None:
    """A tile's shape, or a tensor parameter's where the specialization compiled every
    entry in; None for a tensor whose shape is not all known (or a name that is
    neither)."""
    if name in ctx.plan.tiles:
        return tuple(ctx.plan.tiles[name].shape)
    if name in ctx.params:
        shape = tuple(ctx.namespace.get(shape_constant_name(name, d))
                      for d in range(ctx.params[name].ndim))
        return shape if all(isinstance(e, int) for e in shape) else None
    return None

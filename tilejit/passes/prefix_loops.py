"""A ``T.Parallel`` over the first elements of a fragment (part of layout inference).

TileLang programs loop over part of a fragment's range: ``for i in T.Parallel(4):
D[i, k] = S_frag[i]`` with ``S_frag`` of shape (8,) (TileLang issue 1744). A fragment
loop follows the layout of the fragment it indexes, which covers the fragment's whole
shape; such a loop becomes a loop over that shape whose body runs for the indices below
the loop's own extents:

    for i in T.Parallel(8):
        if i < 4:
            D[i, k] = S_frag[i]

which is the same set of iterations. Taken only when every fragment the loop reads or
writes is indexed by exactly the loop's indices, in order (or at constant indices), all
those fragments have one shape, and the loop's static extents are at most that shape in
every dimension; any other mix keeps the loop as written (the layout pass then names
what does not fit).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.plan import FRAGMENT
from tilejit.passes.fragment_subscripts import constant_index, index_names, loop_names
from tilejit.passes.static_eval import NotStatic


def widen_prefix_loops(fdef: ast.FunctionDef, ctx, static) -> ast.FunctionDef:
    frags = {n: t.shape for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT}
    if not frags:
        return fdef
    for loop in syntax.walk(fdef):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and not loop.iter.keywords
                and resolve_static(loop.iter.func, ctx.namespace) is T.Parallel):
            continue
        loop_vars = loop_names(loop.target)
        if not loop_vars or len(loop_vars) != len(loop.iter.args):
            continue
        shape = _common_shape(loop, loop_vars, frags)
        if shape is None or len(shape) != len(loop_vars):
            continue
        try:
            extents = tuple(static.value(a) for a in loop.iter.args)
        except NotStatic:
            continue
        if extents == tuple(shape) or any(
                not isinstance(e, int) or e > s for e, s in zip(extents, shape)):
            continue
        tests = [ast.Compare(ast.Name(v, ast.Load()), [ast.Lt()], [extent])
                 for v, extent, e, s in zip(loop_vars, loop.iter.args, extents, shape) if e < s]
        test = tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)
        loop.body = [ast.copy_location(ast.If(test, loop.body, []), loop.body[0])]
        loop.iter.args = [ast.copy_location(ast.Constant(s), a)
                          for s, a in zip(shape, loop.iter.args)]
    return syntax.fix_missing_locations(fdef)


def _common_shape(loop, loop_vars, frags):
    """The one shape of the fragments the loop indexes by all of its indices, or None
    (none, several shapes, or a fragment indexed any other way)."""
    shape = None
    for sub in syntax.walk(ast.Module(body=loop.body, type_ignores=[])):
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                and sub.value.id in frags):
            continue
        if constant_index(sub) is not None:
            continue
        if index_names(sub) != list(loop_vars):
            return None
        here = frags[sub.value.id]
        if shape is not None and here != shape:
            return None
        shape = here
    return shape

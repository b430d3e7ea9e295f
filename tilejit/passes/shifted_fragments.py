"""Pass: a ``T.Parallel`` that reads a fragment at rows shifted by a value fixed in the
loop, as DeepSeek-V3.2's sparse-MLA backward stores its dKV accumulator in halves:

    for s in range(split):
        for bi, d in T.Parallel(BS, D):
            if bi < BS // split:
                acc_shared[bi, d] = acc[bi + s * (BS // split), d]

A fragment's element is held by one thread; the loop's iteration (bi, d) reads the
element (bi + off, d), which a layout of the loop over its own indices puts in another
thread. TileLang lays the loop out by the fragment's thread for that element. Here the
loop takes the fragment's indices instead: it runs over (r, d), the fragment's own
shape, with ``bi = r - off``, and an iteration outside the original range (bi < 0 or
bi >= BS) does nothing:

    for __tj_shift_r, d in T.Parallel(BS, D):
        bi = __tj_shift_r - (s * (BS // split))
        if bi >= 0:
            if bi < BS:
                if bi < BS // split:
                    acc_shared[bi, d] = acc[__tj_shift_r, d]

The original iterations whose shifted row falls past the fragment (bi + off >= BS) are
not run: such an iteration would read outside the fragment wherever it reads it, an
error the simulator (which runs the loop as written) reports, so the loop's body must
guard it, as the example does; the rewrite applies only where the body is one ``if``
with no ``else`` (nothing runs when its test fails) whose statements each read the
fragment unconditionally (so a left-out iteration that passes the test is such an
error), and the offset is computed before the loop. It applies to a loop whose extents
are the fragment's shape, whose only fragment is that one, read (never written) at the
loop's first index plus an offset that reads none of the loop's indices, and its other
indices in order.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.ir.plan import FRAGMENT
from tilejit.passes.fragment_subscripts import is_parallel, loop_names
from tilejit.passes.static_eval import NotStatic, StaticEval

_ROW = "__tj_shift_r"


def _shift(sub, loop_vars):
    """The offset expression of ``F[v0 + off, v1, ...]`` (``off + v0`` too), else None."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if len(elts) != len(loop_vars) or any(
            not (isinstance(e, ast.Name) and e.id == v) for e, v in zip(elts[1:], loop_vars[1:])):
        return None
    first = elts[0]
    if not (isinstance(first, ast.BinOp) and isinstance(first.op, ast.Add)):
        return None
    for var, off in ((first.left, first.right), (first.right, first.left)):
        if isinstance(var, ast.Name) and var.id == loop_vars[0] and not any(
                isinstance(n, ast.Name) and n.id in loop_vars for n in syntax.walk(off)):
            return off
    return None


def _every_statement_reads(stmts, reads) -> bool:
    """Whether each statement is an assignment whose value reads the fragment where it
    is always evaluated (not under a conditional expression, ``and``/``or`` or
    ``T.if_then_else``): an iteration the rewrite leaves out (its shifted row past the
    fragment) that passes the branch's test would read outside the fragment, an error
    the simulator reports, so leaving it out changes no valid program."""
    for st in stmts:
        if not isinstance(st, (ast.Assign, ast.AugAssign)):
            return False
        if not _reads_eagerly(st.value, reads):
            return False
    return True


def _reads_eagerly(expr, reads) -> bool:
    if id(expr) in reads:
        return True
    if isinstance(expr, (ast.IfExp, ast.BoolOp, ast.Lambda)):
        return False
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr == "if_then_else":
        return False
    return any(_reads_eagerly(c, reads) for c in ast.iter_child_nodes(expr))


class _Shifts(syntax.NodeTransformer):
    def __init__(self, ctx, static):
        self.ctx, self.static = ctx, static
        self.count = 0

    def visit_For(self, node):
        node = self.generic_visit(node)
        if not is_parallel(node, self.ctx) or len(node.body) != 1 or \
                not isinstance(node.body[0], ast.If) or node.body[0].orelse:
            return node
        loop_vars = loop_names(node.target)
        if not loop_vars:
            return node
        tiles = self.ctx.plan.tiles
        frags = [n for n in syntax.walk(node) if isinstance(n, ast.Subscript)
                 and isinstance(n.value, ast.Name) and n.value.id in tiles
                 and tiles[n.value.id].kind == FRAGMENT]
        if not frags or len({f.value.id for f in frags}) != 1:
            return node
        shifts = [_shift(f, loop_vars) for f in frags]
        if any(s is None for s in shifts) or any(isinstance(f.ctx, ast.Store) for f in frags) \
                or len({ast.unparse(s) for s in shifts}) != 1:
            return node
        inside = {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
        if any(isinstance(n, ast.Name) and n.id in inside for n in syntax.walk(shifts[0])):
            return node                 # the offset must be known before the loop runs
        if not _every_statement_reads(node.body[0].body, {id(f) for f in frags}):
            return node
        tile = tiles[frags[0].value.id]
        try:
            extents = [self.static.value(a) for a in node.iter.args]
        except NotStatic:
            return node
        if tuple(extents) != tuple(tile.shape):
            return node
        row = f"{_ROW}{self.count}"
        self.count += 1
        for f in frags:
            elts = f.slice.elts if isinstance(f.slice, ast.Tuple) else [f.slice]
            f.slice = ast.Tuple([ast.Name(row, ast.Load())] + elts[1:], ast.Load()) \
                if len(elts) > 1 else ast.Name(row, ast.Load())
        first = loop_vars[0]
        target = node.target
        if isinstance(target, ast.Tuple):
            target.elts[0] = ast.Name(row, ast.Store())
        else:
            node.target = ast.Name(row, ast.Store())
        bound = ast.Assign([ast.Name(first, ast.Store())], ast.BinOp(
            ast.Name(row, ast.Load()), ast.Sub(), copy.deepcopy(shifts[0])))
        low = ast.Compare(ast.Name(first, ast.Load()), [ast.GtE()], [ast.Constant(0)])
        high = ast.Compare(ast.Name(first, ast.Load()), [ast.Lt()],
                           [ast.Constant(extents[0])])
        node.body = [bound, ast.If(low, [ast.If(high, node.body, [])], [])]
        return syntax.fix_missing_locations(ast.copy_location(node, node))


def shift_fragment_loops(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(isinstance(n, ast.For) and is_parallel(n, ctx) for n in syntax.walk(fdef)):
        return fdef
    return _Shifts(ctx, StaticEval(ctx.namespace, ctx.param_dtypes, fdef)).visit(fdef)

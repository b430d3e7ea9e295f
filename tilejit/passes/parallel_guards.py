"""Pass: version guarded ``T.Parallel`` bodies so whole vector groups run unguarded.

A T.Parallel loop gives each thread groups of ``vec`` consecutive iterations (see
``lowering/parallel.py``); LLVM merges a group's accesses into 16-byte ones only when
nothing branches between them. The seeds' idiom branches on every element::

    for i in T.Parallel(block):
        idx = bx * block + i
        if idx < N:
            C[idx] = A[idx] + B[idx]

When the guard is a conjunction of comparisons between expressions affine in the
innermost index, the set of lanes of a group that pass it is an interval, so checking
the group's first and last lane decides the whole group. The pass rewrites the loop
into::

    for g in parallel_groups(block):                 # this thread's groups
        full = True
        for v in group_ends(block):                  # lanes 0 and vec-1
            i = lane_index(g, v, block); idx = ...; full = full and (idx < N)
        if full:
            for v in group_lanes(block):             # vec lanes, straight-line
                i = lane_index(g, v, block); idx = ...; C[idx] = A[idx] + B[idx]
        else:
            for v in group_lanes(block):
                i = lane_index(g, v, block); idx = ...
                if idx < N: C[idx] = A[idx] + B[idx]

Applies when the body is pure assignments followed by one ``if`` without ``else``. A body
of plain assignments whose only subscripts are elements of global tensors (an
element-wise map) gets the groups and straight-line lanes too. Conditional expressions
whose tests are such intervals (safe memory's guarded reads, ``A[i] if 0 <= i < n else
0``, ``safe_memory.py``) join the group's check, and the fast path takes their values
plainly; a test whose names are assigned again after it, or that depends on data, stays
where it is. Otherwise the loop is left alone. The simulator runs the original loop.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import ENDS, GROUPS, LANE_INDEX, LANES, LANES_REVERSED


def _names(node) -> set[str]:
    return {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)}


def _affine(node, lane: set[str]) -> bool:
    """Affine in the lane-dependent names: +, - of affine terms, * by a lane-invariant
    factor; anything not mentioning a lane-dependent name is a constant."""
    if not (_names(node) & lane):
        return True
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _affine(node.operand, lane)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return _affine(node.left, lane) and _affine(node.right, lane)
        if isinstance(node.op, ast.Mult):
            left_dep = bool(_names(node.left) & lane)
            right_dep = bool(_names(node.right) & lane)
            if left_dep and right_dep:
                return False
            return _affine(node.left if left_dep else node.right, lane)
    return False


def _interval_test(test, lane: set[str]) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_interval_test(v, lane) for v in test.values)
    if isinstance(test, ast.Compare):
        ops_ok = all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in test.ops)
        return ops_ok and all(_affine(e, lane) for e in [test.left, *test.comparators])
    return not (_names(test) & lane)


_IMPURE = ("print", "atomic", "device_assert", "assume")


def _pure(expr) -> bool:
    for n in syntax.walk(expr):
        if isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield)):
            return False
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(
                n.func, "id", "")
            if any(word in name for word in _IMPURE):
                return False
    return True


def _lane_names(pre: list, innermost: str):
    """(lane, nonaffine): the names the pure assignments ``pre`` make affine in the
    innermost index, and those they make otherwise lane-dependent; None where ``pre`` is
    not pure assignments to names or assigns the index itself."""
    lane, nonaffine = {innermost}, set()
    for stmt in pre:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and _pure(stmt.value)):
            return None
        name, deps = stmt.targets[0].id, _names(stmt.value)
        if name == innermost:
            return None
        lane.discard(name)
        nonaffine.discard(name)
        if deps & nonaffine or (deps & lane and not _affine(stmt.value, lane)):
            nonaffine.add(name)
        elif deps & lane:
            lane.add(name)
    return lane, nonaffine


def _split_body(loop: ast.For, innermost: str):
    """(preamble, guard, lane, nonaffine) when the body is pure assignments then one
    ``if`` whose test is an interval in the innermost index; else None."""
    if not loop.body:
        return None
    *pre, last = loop.body
    if not isinstance(last, ast.If) or last.orelse:
        return None
    names = _lane_names(pre, innermost)
    if names is None:
        return None
    lane, nonaffine = names
    if _names(last.test) & nonaffine or not _pure(last.test):
        return None
    if not _interval_test(last.test, lane):
        return None
    return pre, last, lane, nonaffine


def _assigned(stmts) -> set[str]:
    return {n.id for s in stmts for n in syntax.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


_LANE_GUARD = "_tj_lane_guard"


def _conditional_guards(pre: list, guarded: list, lane: set, nonaffine: set) -> list:
    """The tests of the conditional expressions (safe memory's guarded reads:
    ``A[i] if 0 <= i < n else 0``) in ``pre`` and ``guarded`` that are intervals in the
    lane and mean, after ``pre``, what they mean where they stand; each such expression
    is marked so that the fast path takes its value branch (``_TakeValues``)."""
    tests, seen = [], set()
    places = [(stmt, _assigned(pre[k:])) for k, stmt in enumerate(pre)]
    places += [(stmt, _assigned(guarded)) for stmt in guarded]
    for stmt, later in places:
        for n in syntax.walk(stmt):
            if not isinstance(n, ast.IfExp):
                continue
            used = _names(n.test)
            if used & (nonaffine | later) or not _pure(n.test) or \
                    not _interval_test(n.test, lane):
                continue
            setattr(n, _LANE_GUARD, True)
            key = ast.dump(n.test)
            if key not in seen:
                seen.add(key)
                tests.append(n.test)
    return tests


class _TakeValues(syntax.NodeTransformer):
    """Where a group's lanes all pass the guards: a marked conditional is its value."""
    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        return node.body if getattr(node, _LANE_GUARD, False) else node


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _lane_loop(var, iterator, extents, target, body):
    index = ast.Assign([copy.deepcopy(target)],
                       _call(LANE_INDEX, [ast.Name("__tj_g", ast.Load()),
                                          ast.Name(var, ast.Load()),
                                          *copy.deepcopy(extents)]))
    return ast.For(ast.Name(var, ast.Store()), _call(iterator, copy.deepcopy(extents)),
                   [index, *copy.deepcopy(body)], [])


def _element_wise(loop: ast.For, tensors) -> bool:
    """A body of plain assignments whose only subscripts are elements of the global tensors
    ``tensors`` (an element-wise map: ``C[r, c] = A[r, c] + B[r, c]``)."""
    for stmt in loop.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AugAssign):
            target = stmt.target
        else:
            return False
        if not isinstance(target, (ast.Name, ast.Subscript)) or not _pure(stmt.value):
            return False
        for n in syntax.walk(stmt):
            if isinstance(n, ast.Subscript) and not (isinstance(n.value, ast.Name)
                                                     and n.value.id in tensors):
                return False
    return bool(loop.body)


class _Versioner(syntax.NodeTransformer):
    def __init__(self, namespace, tensors=()):
        self.namespace = namespace
        # an element-wise T.Parallel of global tensors with no guard (or whose safe-memory
        # guards the index ranges proved unneeded: safe_memory.py) runs its groups as
        # straight-line lanes too, which LLVM merges into 16-byte accesses; a thread of
        # many groups otherwise walks a rolled loop of single elements (C = A + B at 8192^2
        # fp16 in 128 x 256 tiles of 256 threads: 1.19 TB/s on the H100, torch 2.97)
        self.tensors = set(tensors)

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and not it.keywords and
                resolve_static(it.func, self.namespace) is T.Parallel):
            return node
        target = node.target
        if isinstance(target, ast.Name):
            innermost = target.id
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            innermost = target.elts[-1].id
        else:
            return node
        split = _split_body(node, innermost)
        extents = it.args
        if split is not None:
            pre, guard, lane, nonaffine = split
            guarded, tests = guard.body, [guard.test]
        elif self.tensors and _element_wise(node, self.tensors):
            count = 0
            while count < len(node.body) and _lane_names(node.body[:count + 1],
                                                         innermost) is not None:
                count += 1
            pre, guarded, guard = node.body[:count], node.body[count:], None
            lane, nonaffine = _lane_names(pre, innermost)
            tests = []
        else:
            return node
        tests += _conditional_guards(pre, guarded, lane, nonaffine)
        if not tests:
            lanes = _lane_loop("__tj_v", LANES, extents, target, node.body)
            new = ast.For(ast.Name("__tj_g", ast.Store()),
                          _call(GROUPS, copy.deepcopy(extents)), [lanes], [])
            return _located(new, node)
        full = "__tj_full"
        check = _lane_loop("__tj_v", ENDS, extents, target, pre + [ast.Assign(
            [ast.Name(full, ast.Store())],
            ast.BoolOp(ast.And(), [ast.Name(full, ast.Load()),
                                   *(copy.deepcopy(t) for t in tests)]))])
        # the fast path walks its lanes last to first, so that its code never ends like
        # the guarded path's, which LLVM would otherwise sink into one shared tail
        taken = [_TakeValues().visit(copy.deepcopy(s)) for s in pre + guarded]
        fast = _lane_loop("__tj_v", LANES_REVERSED, extents, target, taken)
        slow = _lane_loop("__tj_v", LANES, extents, target,
                          pre + ([guard] if guard is not None else guarded))
        body = [ast.Assign([ast.Name(full, ast.Store())], ast.Constant(True)), check,
                ast.If(ast.Name(full, ast.Load()), [fast], [slow])]
        new = ast.For(ast.Name("__tj_g", ast.Store()), _call(GROUPS, copy.deepcopy(extents)),
                      body, [])
        return _located(new, node)


def _located(new: ast.For, node: ast.For) -> ast.For:
    for n in syntax.walk(new):
        if not hasattr(n, "lineno") or n.lineno is None:
            ast.copy_location(n, node)
    syntax.fix_missing_locations(new)
    for n in syntax.walk(new):
        if isinstance(n, (ast.stmt, ast.expr)) and getattr(n, "lineno", None) is None:
            n.lineno = node.lineno
    return ast.copy_location(new, node)


def version_parallel_guards(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    return _Versioner(ctx.namespace, ctx.params).visit(fdef)

"""Front end: a block barrier (``T.sync_threads()``) or the grid's (``T.sync_grid()``)
among the statements of a ``T.Parallel`` body, for the GPU and the simulator alike.

TileLang keeps such a barrier inside the loop its threads share out, so that a thread
with two iterations waits twice and one with none not at all (the barrier then works
only where every thread has the same number of iterations and the others have left the
kernel). What its programs mean by it is what they test: every iteration's statements
before the barrier run, on all the threads (of the grid), before any iteration's
statements after it. Here the loop is cut in two at the barrier, each part a
``T.Parallel`` over the same extents with the same indices, the barrier between them:

    for i in T.Parallel(64):          for i in T.Parallel(64):
        F[i] = A[n - i - 1]      →        F[i] = A[n - i - 1]
        T.sync_grid()                 T.sync_grid()
        A[i] = A[i] + F[i]            for i in T.Parallel(64):
                                          A[i] = A[i] + F[i]

What crosses the barrier must live in a tile (a fragment indexed alike in both parts
keeps its elements on the same threads). A name, or a ``T.alloc_local`` / ``T.alloc_var``
tile (each thread's own), set before the barrier and read after it would hold one
thread's last iteration's value, so it is an error, as is a barrier under
an ``if`` or in a loop inside the ``T.Parallel`` (not every iteration would reach it) and
a body that leaves an iteration early (``continue``, ``break``, ``return``) before a
barrier.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import names_bound_to, resolve_static

_BARRIERS = (T.sync_threads, T.sync_grid)


def _barrier(stmt, namespace):
    """The barrier function ``stmt`` calls (a bare ``T.sync_threads()`` or
    ``T.sync_grid()`` statement), else None. ``T.sync_threads(id, count)``, a named
    barrier of some threads, is not one here."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    fn = resolve_static(stmt.value.func, namespace)
    if fn not in _BARRIERS or (fn is T.sync_threads and (stmt.value.args or
                                                         stmt.value.keywords)):
        return None
    return fn


def _stored(stmts) -> dict:
    """Names bound by ``stmts`` (assignments, loop targets, ``with ... as``), each with its
    first binding node."""
    out: dict = {}
    for n in syntax.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.setdefault(n.id, n)
    return out


def _exposed(stmts) -> dict:
    """The names ``stmts`` read before they set them (their values come from before the
    statements), each with its first such read. A name set in a loop body, or in one
    branch of an ``if`` only, is not taken as set after it; a loop's target is set in
    its body. An element store (``t[0] = x``) reads ``t``: it sets an element only."""
    out: dict = {}

    def reads(node, defined):
        for n in syntax.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and \
                    n.id not in defined:
                out.setdefault(n.id, n)

    def block(body, defined):
        defined = set(defined)
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                reads(stmt.iter, defined)
                block(stmt.body, defined | set(_stored([ast.Expr(stmt.target)])))
                block(stmt.orelse, defined)
            elif isinstance(stmt, ast.While):
                reads(stmt.test, defined)
                block(stmt.body, defined)
                block(stmt.orelse, defined)
            elif isinstance(stmt, ast.If):
                reads(stmt.test, defined)
                taken = block(stmt.body, defined)
                other = block(stmt.orelse, defined)
                if stmt.orelse:                 # set on both paths: set after the `if`
                    defined |= taken & other
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    reads(item.context_expr, defined)
                block(stmt.body, defined | set(_stored([ast.Expr(i.optional_vars)
                                                        for i in stmt.items
                                                        if i.optional_vars is not None])))
            elif isinstance(stmt, ast.AugAssign):
                reads(stmt, defined)
                target = stmt.target
                if isinstance(target, ast.Name) and target.id not in defined:
                    out.setdefault(target.id, target)       # `x += 1` reads x
            else:
                value = getattr(stmt, "value", None)
                reads(value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and
                      value is not None else stmt, defined)
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for t in targets:       # a subscript target reads its base and index
                        if not isinstance(t, ast.Name):
                            reads(t, defined)
                    defined |= set(_stored([ast.Expr(t) for t in targets]))
        return defined

    block(list(stmts), set())
    return out


class _Splits(syntax.NodeTransformer):
    def __init__(self, namespace, error, locals_=frozenset()):
        self.namespace = namespace
        self.error = error
        self.locals = locals_       # T.alloc_local / T.alloc_var tiles: each thread's own

    def _is_parallel(self, node) -> bool:
        return isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
            resolve_static(node.iter.func, self.namespace) is T.Parallel

    def visit_For(self, node):
        node = self.generic_visit(node)
        if not self._is_parallel(node):
            return node
        self._check_nested(node)
        cuts = [k for k, s in enumerate(node.body) if _barrier(s, self.namespace)]
        if not cuts:
            return node
        segments, barriers, start = [], [], 0
        for k in cuts:
            segments.append(node.body[start:k])
            barriers.append(node.body[k])
            start = k + 1
        segments.append(node.body[start:])
        self._check_crossing(node, segments, barriers)
        out = []
        for k, segment in enumerate(segments):
            if segment:
                part = copy.deepcopy(node) if k else node
                part.body = copy.deepcopy(segment) if k else segment
                out.append(part)
            if k < len(barriers):
                out.append(barriers[k])
        return out

    def _check_nested(self, loop):
        """A barrier below the loop's own statements (under an ``if``, in a serial loop):
        not every iteration, so not every thread, would reach it."""
        for stmt in loop.body:
            if _barrier(stmt, self.namespace):
                continue
            for n in syntax.walk(stmt):
                fn = _barrier(n, self.namespace)
                if fn is not None:
                    raise self.error(
                        f"T.{fn.__name__}() inside a T.Parallel loop, under a statement of "
                        f"its body: the loop's iterations are spread over the threads, and "
                        f"not every thread would reach it; put the barrier before or after "
                        f"the loop, or among the loop's own statements (the loop is then cut "
                        f"in two there)", n)

    def _check_crossing(self, loop, segments, barriers):
        indices = {n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)}
        for k, barrier in enumerate(barriers):
            before, after = segments[:k + 1], segments[k + 1:]
            flat_before = [s for seg in before for s in seg]
            for n in syntax.walk(ast.Module(body=flat_before, type_ignores=[])):
                if isinstance(n, (ast.Continue, ast.Break, ast.Return)) and \
                        not self._in_inner_loop(flat_before, n):
                    raise self.error(
                        f"`{type(n).__name__.lower()}` before the "
                        f"T.{_barrier(barrier, self.namespace).__name__}() in this "
                        f"T.Parallel loop: the loop is cut in two at the barrier, and an "
                        f"iteration that leaves early would still run its statements after "
                        f"it; put the test in an `if` around the statements instead", n)
            stored = set(_stored(flat_before)) | {
                n.value.id for n in syntax.walk(ast.Module(body=flat_before, type_ignores=[]))
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and
                isinstance(n.value, ast.Name) and n.value.id in self.locals}
            loaded = _exposed([s for seg in after for s in seg])
            crossing = sorted((stored & set(loaded)) - indices,
                              key=lambda n: (loaded[n].lineno, loaded[n].col_offset))
            if crossing:
                name = getattr(loaded[crossing[0]], "tj_name", crossing[0])
                fn = _barrier(barrier, self.namespace).__name__
                raise self.error(
                    f"`{name}` is set in this T.Parallel loop before its T.{fn}() (line "
                    f"{barrier.lineno}) and read after it: the loop is cut in two at the "
                    f"barrier, every iteration's statements before it running first, so "
                    f"`{name}` would hold one iteration's value only; keep it in a "
                    f"fragment indexed by the loop's indices, or compute it again after "
                    f"the barrier", loaded[crossing[0]])

    @staticmethod
    def _in_inner_loop(stmts, target) -> bool:
        """Whether ``target`` (a break/continue) belongs to a loop inside ``stmts``."""
        for n in syntax.walk(ast.Module(body=list(stmts), type_ignores=[])):
            if isinstance(n, (ast.For, ast.While)) and not isinstance(target, ast.Return) \
                    and any(m is target for m in syntax.walk(n)):
                return True
        return False


def split_parallel_at_barriers(fdef: ast.FunctionDef, namespace: dict,
                               error) -> ast.FunctionDef:
    """``fdef`` with each ``T.Parallel`` loop whose body holds ``T.sync_threads()`` or
    ``T.sync_grid()`` statements cut into one loop per stretch between them."""
    if not any(isinstance(n, ast.Expr) and _barrier(n, namespace) for n in syntax.walk(fdef)):
        return fdef
    locals_ = frozenset(names_bound_to(fdef, namespace, (T.alloc_local, T.alloc_var)))
    return _Splits(namespace, error, locals_).visit(fdef)

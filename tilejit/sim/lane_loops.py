"""Loops of per-thread code whose threads leave at different times, in the simulator's
lane-wise run (``threads.py``): a ``while`` whose condition depends on the thread index
(a grid-stride ``while pos < n: ... pos += stride``), and a ``continue`` or ``break``
under a branch some threads take (``if seq < 0: out[i] = 0; continue``).

On the GPU each thread leaves by itself; here the lanes run together, so a loop keeps two
masks, names of the simulated program:

- ``brk``: the lanes still in the loop (``True``: all that entered). A ``while`` ends a
  lane's stay where its condition fails; a ``break`` ends it for the lanes that take it.
- ``on``: the lanes still in this iteration: ``brk`` at its start, less the lanes that
  took a ``continue`` (or ``break``) since.

The loop runs while any active lane is in it (``threads.any_on``); its body runs under
``where(on)``, and the statements after one that may take a lane out run under a fresh
``where(on)``, where a lane is left (the segments of ``LaneLoops._segments``). A
``continue``/``break`` itself becomes ``on = threads.leave(on)`` (and ``brk`` alike), and
what follows it in its block is not run: every lane that reaches it leaves. With a
condition the same in every thread the loop runs as Python's. A branch that also returns
from the kernel keeps Python's meaning (its condition must be the same in every thread:
``transform._leaves``)."""
from __future__ import annotations

import ast
import itertools

from tilejit import syntax

_counter = itertools.count()


def _own_escape(stmt) -> bool:
    """Whether ``stmt`` is, or holds through ``if`` statements only, a break or continue
    of the loop around it."""
    if isinstance(stmt, (ast.Break, ast.Continue)):
        return True
    if isinstance(stmt, ast.If):
        return any(_own_escape(s) for s in stmt.body + stmt.orelse)
    return False


def returns_in(body) -> bool:
    """Whether statements return from the kernel (a loop or branch holding one keeps
    Python's meaning: the branch that returns must be the same in every thread)."""
    return any(isinstance(n, ast.Return) for s in body for n in syntax.walk(s))


def _maskable(stmt) -> bool:
    """An ``if`` whose break/continue the masks take (one that returns keeps Python's)."""
    return isinstance(stmt, ast.If) and _own_escape(stmt) and not returns_in([stmt])


def _own_return(stmt) -> bool:
    """Whether ``stmt`` is, or holds through ``if`` statements only, a bare ``return``
    (a thread's early exit: ``if tx >= n: return``)."""
    if isinstance(stmt, ast.Return):
        return stmt.value is None
    if isinstance(stmt, ast.If):
        return any(_own_return(s) for s in stmt.body + stmt.orelse) and not any(
            isinstance(n, (ast.For, ast.While, ast.Break, ast.Continue))
            for s in stmt.body + stmt.orelse for n in syntax.walk(s))
    return False


def _name(name, store=False):
    return ast.Name(name, ast.Store() if store else ast.Load())


class LaneLoops:
    """Mixed into ``transform._ThreadLanes`` (its ``visit``, ``depth``,
    ``masked_branches``, ``_call_threads`` and ``_where``)."""

    @staticmethod
    def escaping(body) -> bool:
        """Whether a loop body takes lanes out by a break/continue under a branch."""
        return any(_maskable(s) for s in body)

    def lane_loop_body(self, body, node):
        """``(before the loop, the loop's body)`` where the body's break/continue take
        lanes out (``escaping``): ``brk = True`` before, and ``on = brk``, the end where no
        lane is on, and the body's segments under ``where(on)``."""
        n = next(_counter)
        on, brk = f"__tj_on{n}", f"__tj_brk{n}"
        before = [ast.copy_location(ast.Assign([_name(brk, True)], ast.Constant(True)), node)]
        self.depth += 1
        segments = self._segments(body, on, brk)
        self.depth -= 1
        stmts = [ast.Assign([_name(on, True)], _name(brk)),
                 ast.If(ast.UnaryOp(ast.Not(), self._call_threads("any_on", [_name(on)])),
                        [ast.Break()], []),
                 ast.With([ast.withitem(self._where(_name(on)), None)], segments)]
        return before, [syntax.fix_missing_locations(ast.copy_location(s, node))
                        for s in stmts]

    def lane_while(self, node):
        """``while test: body`` with lanes leaving when their test fails (or by a break):
        ``brk = True; while True: on = loop_on(test, brk); if not any_on(on): break;
        brk = on; with where(on): body``."""
        n = next(_counter)
        on, brk = f"__tj_on{n}", f"__tj_brk{n}"
        self.depth += 1
        segments = self._segments(node.body, on, brk)
        self.depth -= 1
        loop = ast.While(ast.Constant(True), [
            ast.Assign([_name(on, True)], self._call_threads(
                "loop_on", [self.visit(node.test), _name(brk)])),
            ast.If(ast.UnaryOp(ast.Not(), self._call_threads("any_on", [_name(on)])),
                   [ast.Break()], []),
            ast.Assign([_name(brk, True)], _name(on)),
            ast.With([ast.withitem(self._where(_name(on)), None)], segments)], [])
        out = [ast.Assign([_name(brk, True)], ast.Constant(True)), loop]
        return [syntax.fix_missing_locations(ast.copy_location(s, node)) for s in out]

    def _segments(self, stmts, on, brk):
        """``stmts`` with each break/continue a mask update, and what follows a statement
        that may take lanes out under a fresh ``where(on)``."""
        def leaves(stmt):
            if not isinstance(stmt, (ast.Break, ast.Continue)):
                return None
            return [self._leave(stmt, on)] + (
                [self._leave(stmt, brk)] if isinstance(stmt, ast.Break) else [])
        return self._segmented(stmts, on, leaves, _maskable,
                               lambda body: self._segments(body, on, brk))

    def _segmented(self, stmts, on, leaves, maskable, again):
        """``stmts`` where ``leaves(stmt)`` gives the mask updates of a statement that
        takes the lanes reaching it out (None for others), ``maskable(stmt)`` an ``if``
        holding one, whose sides run under their masks (``again`` their statements), and
        what follows it under a fresh ``where(on)``, where a lane is left."""
        out = []
        for i, stmt in enumerate(stmts):
            left = leaves(stmt)
            if left is not None:
                out.extend(left)
                return out                      # (the rest: no lane that got here runs it)
            if not maskable(stmt):
                visited = self.visit(stmt)
                out.extend(visited if isinstance(visited, list) else [visited])
                continue
            out.extend(syntax.fix_missing_locations(s)
                       for s in self.masked_branches(stmt, again))
            rest = stmts[i + 1:]
            if rest:
                self.depth += 1
                inner = again(rest)
                self.depth -= 1
                # (only where a lane is left: no one reaches a barrier after a break or a
                # return all the lanes took)
                masked = ast.With([ast.withitem(self._where(_name(on)), None)], inner)
                out.append(syntax.fix_missing_locations(ast.copy_location(ast.If(
                    self._call_threads("any_on", [_name(on)]), [masked], []), rest[0])))
            return out
        return out

    def kernel_body(self, stmts):
        """The kernel's statements where a thread-dependent ``if`` returns (an early
        exit some threads take): a ``return`` is ``alive = threads.leave(alive)``, and the
        statements after such an ``if`` run under ``where(alive)``, where a lane is left,
        as a loop's ``break`` (``_segments``). A barrier after it is the compiler's error
        (``T.sync_threads() inside a branch ... that depends on the thread index``)."""
        if not any(_own_return(s) for s in stmts):
            return None
        alive = f"__tj_alive{next(_counter)}"
        start = ast.Assign([_name(alive, True)], ast.Constant(True))
        return [syntax.fix_missing_locations(ast.copy_location(start, stmts[0]))] + \
            self._return_segments(stmts, alive)

    def _return_segments(self, stmts, alive):
        def leaves(stmt):
            if isinstance(stmt, ast.Return) and stmt.value is None:
                return [self._leave(stmt, alive)]
            return None
        return self._segmented(stmts, alive, leaves, _own_return,
                               lambda body: self._return_segments(body, alive))

    def _leave(self, stmt, name):
        return syntax.fix_missing_locations(ast.copy_location(ast.Assign(
            [_name(name, True)], self._call_threads("leave", [_name(name)])), stmt))

"""TileLang's ``T.async_copy(src, dst)``: the block's copy of a global region into a shared
tile, issued without waiting; ``T.ptx_wait_group(n)`` waits until at most the ``n`` latest
of the copies issued before it may still be in flight (each ``T.async_copy`` is one group,
as TileLang commits each; groups a kernel's own ``T.ptx_commit_group`` closes are not
counted: with them a wait leaves fewer of these copies in flight, never more).
``T.async_copy`` is a statement of its own (``_ = T.async_copy(...)`` is a CompileError).

A program may read (or write) the tile only after a wait that covers its copy. That is
checked here, along every path of the program: the copies in flight are followed per
path, in the order they were issued, so a wait counts each path's copies on its own (an
``if`` that issues a copy on one arm only, a loop that may run no iteration); past 64
paths they are followed as one, in an order unknown, which only a wait(0) empties. A
loop's body is walked from its entry and from the end of an iteration (a ``continue``'s
included) until that state repeats; after the loop the program goes on from that state
(no iteration, or the last one's end) or from a ``break``. An ``if`` decided at compile
time (a test of constants and of globals or closure values the kernel does not assign,
as the parse reads them) has its taken arm checked only. A view of the tile
(``T.reshape``, ``T.view``, the tile under a second name) is the tile. A statement that
names the tile while its copy may be in flight is a CompileError at that line, on the GPU
and in the simulator alike, for it reads memory a copy is still writing.

A program that passes the check means the same with the copy done at once: each
``T.async_copy`` becomes ``T.copy(src, dst)`` (which the compiler issues as cp.async, or
pipelines in a ``T.Pipelined`` loop, itself), and its waits and commits, having no copy
of the thread's own to wait for, are taken out. In a kernel that also issues
``T.ptx_cp_async`` copies of its own the waits and commits stay (they wait for those).
"""
from __future__ import annotations

import ast
import copy

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import (KernelSource, assigned_names, is_call_to,
                                     statement_lists, static_truth)
from tilejit.frontend.static_prologue import evaluate_static

_ISSUED = "__tj_async_tile_copy"      # the attribute marking a T.copy made from one
_SIGNATURE = ("T.async_copy(src, dst, *, coalesced_width=None, annotations=None, "
              "loop_layout=None)")
_OPTIONS = ("coalesced_width", "annotations", "loop_layout")
_VIEWS = (T.reshape, T.view)          # their first operand (``buffer``) is the tile viewed

# The state of the walk is a frozenset of paths, one per way of reaching the statement
# (the empty set: no way, code after a ``break``). A path is the tuple of the copies in
# flight on it, oldest first, each ``(tile, the T.async_copy statement)``; or, once the
# paths would be too many to follow, a frozenset of copies in flight in an order unknown
# (any subset of them, so only a ``T.ptx_wait_group(0)`` empties it).
_MAX_PATHS = 64
_MAX_ROUNDS = 64        # a loop's walks before its head is taken as any copies in flight
_NOWHERE = frozenset()


def _call_of(ks, stmt, fn):
    if isinstance(stmt, ast.Expr) and is_call_to(stmt.value, fn, ks.namespace):
        return stmt.value
    return None


def _base(node):
    """The tensor or tile a region or element names (``A[i, 0:k]`` → ``A``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Issue(syntax.NodeTransformer):
    """``T.async_copy(src, dst, ...)`` → ``T.copy(src, dst, ...)``, marked."""

    def __init__(self, ks, shared, params):
        self.ks, self.shared, self.params = ks, shared, params
        self.statements = set()     # ids of the calls that are statements of their own

    def visit_Expr(self, node):
        if is_call_to(node.value, T.async_copy, self.ks.namespace):
            self.statements.add(id(node.value))
        return self.generic_visit(node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not is_call_to(node, T.async_copy, self.ks.namespace):
            return node
        if id(node) not in self.statements:
            # only a statement's copy is followed to its wait
            raise self.ks.error("T.async_copy is a statement of its own: it returns nothing "
                                "to assign or pass on (write `T.async_copy(src, dst)` on its "
                                "own line, then T.ptx_wait_group(n) before using dst)", node)
        args, keywords = self.operands(node)
        src, dst = _base(args[0]), _base(args[1])
        if src not in self.params or dst not in self.shared:
            raise self.ks.error(f"T.async_copy copies a region of a global tensor into a "
                                f"shared tile (cp.async), got `{ast.unparse(args[0])}` → "
                                f"`{ast.unparse(args[1])}`", node)
        func = node.func
        func = ast.Attribute(copy.deepcopy(func.value), "copy", ast.Load()) \
            if isinstance(func, ast.Attribute) else ast.Name("__tj_tile_copy", ast.Load())
        out = ast.copy_location(ast.Call(func, args, keywords), node)
        setattr(out, _ISSUED, dst)
        return out

    def operands(self, node):
        """``[src, dst]`` (given by position or by name, in any order) and the options."""
        if len(node.args) > 2:
            raise self.ks.error(f"{_SIGNATURE} takes a source and a destination, got "
                                f"{len(node.args)} positional arguments", node)
        given = dict(zip(("src", "dst"), node.args))
        options = []
        for k in node.keywords:
            if k.arg in ("src", "dst") and k.arg in given:
                raise self.ks.error(f"{_SIGNATURE}: {k.arg} given twice", node)
            if k.arg in ("src", "dst"):
                given[k.arg] = k.value
            elif k.arg in _OPTIONS:
                options.append(k)
            else:
                raise self.ks.error(f"{_SIGNATURE}: unexpected argument "
                                    f"{k.arg or '**'!r}", node)
        missing = [name for name in ("src", "dst") if name not in given]
        if missing:
            raise self.ks.error(f"{_SIGNATURE} takes a source and a destination, got no "
                                f"{' and no '.join(missing)}", node)
        return [given["src"], given["dst"]], options


def _issue(state, item):
    return frozenset(p | {item} if isinstance(p, frozenset) else p + (item,) for p in state)


def _wait(state, n):
    """Each path with at most its ``n`` latest copies in flight (the order of a frozenset
    path is unknown: any of its copies may be among the latest)."""
    return frozenset(() if n == 0 else p if isinstance(p, frozenset) else p[-n:]
                     for p in state)


def _join(*states):
    """The paths of each state; past ``_MAX_PATHS`` (ifs in a row double them), one path
    of all their copies in an unknown order, which covers every one."""
    paths = frozenset().union(*states)
    loose = [p for p in paths if isinstance(p, frozenset)]
    if len(paths) > _MAX_PATHS:
        loose = paths
    if not loose:
        return paths
    # one unordered path: it covers the others' and each ordered path within it
    every = frozenset(item for p in loose for item in p)
    return frozenset({every} | {p for p in paths
                                if isinstance(p, tuple) and not set(p) <= every})


class _Check:
    """Walks the statements with the copies that may be in flight on each path (module
    docstring) and reports the first statement that names one of their tiles."""

    def __init__(self, ks, keep_waits, views, every):
        self.ks, self.keep_waits, self.views = ks, keep_waits, views
        self.every = every          # every copy of the kernel: a state that covers any
        self.runtime = assigned_names(ks.tree) | set(ks.params)
        self.dropped = set()        # ids of the waits and commits to take out
        self.loops = []             # per loop walked: (states at breaks, at continues)
        self.walked = {}            # {(id(loop), entry state): its exit state}

    def body(self, stmts, state):
        for stmt in stmts:
            state, keep = self.statement(stmt, state)
            if not keep:
                self.dropped.add(id(stmt))
        return state

    def drop(self, tree):
        for stmts in list(statement_lists(tree)):
            kept = [s for s in stmts if id(s) not in self.dropped]
            stmts[:] = kept or [ast.copy_location(ast.Pass(), stmts[0])]

    def statement(self, stmt, state):
        issued = getattr(stmt.value, _ISSUED, None) if isinstance(stmt, ast.Expr) else None
        if issued is not None:
            self.names(stmt.value, state, stmt)
            return _issue(state, (issued, stmt)), True
        wait = _call_of(self.ks, stmt, T.ptx_wait_group)
        if wait is not None:
            return _wait(state, self.wait(wait)), self.keep_waits
        if _call_of(self.ks, stmt, T.ptx_commit_group) is not None:
            return state, self.keep_waits
        jump = self.jump(stmt)
        if jump is not None:
            if self.loops:
                self.loops[-1][jump].append(state)
            return _NOWHERE, True
        if isinstance(stmt, ast.Return):
            self.names(stmt, state, stmt)
            return _NOWHERE, True
        if isinstance(stmt, (ast.For, ast.While)):
            return self.loop(stmt, state), True
        if isinstance(stmt, ast.If):
            return self.branch(stmt, state), True
        if isinstance(stmt, ast.With):
            for item in stmt.items:
                self.names(item.context_expr, state, stmt)
            return self.body(stmt.body, state), True
        self.names(stmt, state, stmt)
        return state, True

    def jump(self, stmt):
        """0 for a ``break`` (or TileLang's ``T.loop_break()``), 1 for a ``continue``."""
        if isinstance(stmt, ast.Break) or _call_of(self.ks, stmt, T.loop_break) is not None:
            return 0
        return 1 if isinstance(stmt, ast.Continue) else None

    def loop(self, stmt, entry):
        if isinstance(stmt, ast.For):
            self.names(stmt.iter, entry, stmt)
        key = (id(stmt), entry)
        if key not in self.walked:      # (a loop in a loop: walked once per entry state)
            self.walked[key] = self.fixed_point(stmt, entry)
        return self.walked[key]

    def fixed_point(self, stmt, entry):
        """The loop's exit state: its head's (the entry, or an iteration's end or
        continue: the loop may run any number of times, none included) walked again
        until it repeats, joined with the states at its breaks."""
        head = entry
        for _ in range(_MAX_ROUNDS):
            breaks, again = self.iteration(stmt, head)
            grown = _join(head, again)
            if grown == head:
                break
            head = grown
        else:       # never seen in practice: a state every copy's paths fall within
            head = frozenset({self.every})
            breaks, _ = self.iteration(stmt, head)
        done = self.body(stmt.orelse, head)     # (run when the loop ends without a break)
        return _join(done, *breaks)

    def iteration(self, stmt, head):
        """The states at the body's breaks, and the state the next iteration starts in."""
        if isinstance(stmt, ast.While):
            self.names(stmt.test, head, stmt)
        self.loops.append(([], []))
        try:
            end = self.body(stmt.body, head)
        finally:
            breaks, continues = self.loops.pop()
        return breaks, _join(end, *continues)

    def branch(self, stmt, state):
        self.names(stmt.test, state, stmt)
        # an arm not taken is walked as unreachable: its waits are taken out all the same
        truth = static_truth(stmt.test, self.ks.namespace, self.runtime)
        body = self.body(stmt.body, _NOWHERE if truth is False else state)
        orelse = self.body(stmt.orelse, _NOWHERE if truth is True else state)
        return _join(body, orelse)

    def wait(self, call):
        """The ``num`` of ``T.ptx_wait_group(num)``: a non-negative int."""
        sig = "T.ptx_wait_group(num)"
        for k in call.keywords:
            if k.arg != "num":
                raise self.ks.error(f"{sig}: unexpected argument {k.arg or '**'!r}; it takes "
                                    "one argument, num (by position or as num=)", call)
        given = list(call.args) + [k.value for k in call.keywords]
        if len(given) != 1:
            raise self.ks.error(f"{sig} takes one argument, num, got {len(given)}", call)
        n = self.static(given[0])
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise self.ks.error(f"{sig}: num is the number of copy groups that may stay in "
                                "flight, a non-negative int known at compile time", call)
        return int(n)

    def static(self, expr):
        """``expr``'s value where it reads only compile-time names (``stages - 2``)."""
        value, known = evaluate_static(copy.deepcopy(expr), dict(self.ks.namespace),
                                       self.runtime)
        return value if known else None

    def names(self, node, state, stmt):
        flight = self.in_flight(state)
        if not flight:
            return
        for n in syntax.walk(node):
            if not isinstance(n, ast.Name):
                continue
            tile = next((t for t in sorted(self.views.get(n.id, {n.id})) if t in flight),
                        None)
            if tile is None:
                continue
            what, into = (f"'{n.id}'", "it") if tile == n.id else \
                (f"'{n.id}' (a view of '{tile}')", f"'{tile}'")
            raise self.ks.error(
                f"{what} is used while the T.async_copy into {into} "
                f"(line {flight[tile].lineno}) may still be in flight: wait for it first "
                f"(T.ptx_wait_group(0)); a tile is in flight as a whole, so give each "
                f"stage of a double buffer a tile of its own", stmt)

    def in_flight(self, state):
        """{tile: the earliest T.async_copy into it in flight on some path}."""
        flight = {}
        for path in state:
            for name, where in path:
                for tile in self.views.get(name, {name}):
                    if tile not in flight or where.lineno < flight[tile].lineno:
                        flight[tile] = where
        return flight


def _allocated(ks, fn):
    return {t.id for node in syntax.walk(ks.tree) if isinstance(node, ast.Assign)
            and is_call_to(node.value, fn, ks.namespace)
            for t in node.targets if isinstance(t, ast.Name)}


def _viewed(ks, value):
    """The name ``value`` makes a view of (``S`` of ``S``, ``T.reshape(S, ...)``,
    ``T.view(S, ...)``), or None."""
    if isinstance(value, ast.Name):
        return value.id
    if not any(is_call_to(value, fn, ks.namespace) for fn in _VIEWS):
        return None
    buffer = value.args[0] if value.args else next(
        (k.value for k in value.keywords if k.arg == "buffer"), None)
    return buffer.id if isinstance(buffer, ast.Name) else None


def _views(ks) -> dict:
    """{name: the names it may be a view of, itself included}: a copy in flight into one
    of them is in flight under each name that views it."""
    direct = {}
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            viewed = _viewed(ks, node.value)
            if viewed is not None:
                direct.setdefault(node.targets[0].id, set()).add(viewed)
    out = {}
    for name in direct:
        seen, todo = set(), [name]
        while todo:                 # (the views of views, each name once)
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(direct.get(n, ()))
        out[name] = seen
    return out


def rewrite_async_tile_copies(ks: KernelSource) -> None:
    """The kernel's ``T.async_copy`` statements as checked ``T.copy`` (module docstring)."""
    ks.namespace.setdefault("__tj_tile_copy", T.copy)
    shared = _allocated(ks, T.alloc_shared)
    ks.tree = _Issue(ks, shared, set(ks.params)).visit(ks.tree)
    keep = any(is_call_to(n, T.ptx_cp_async, ks.namespace) for n in syntax.walk(ks.tree))
    every = frozenset((getattr(n.value, _ISSUED), n) for n in syntax.walk(ks.tree)
                      if isinstance(n, ast.Expr) and hasattr(n.value, _ISSUED))
    check = _Check(ks, keep, _views(ks), every)
    check.body(ks.tree.body, frozenset({()}))
    check.drop(ks.tree)

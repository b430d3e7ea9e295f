"""TileLang's ``T.async_copy(src, dst)``: the block's copy of a global region into a shared
tile, issued without waiting; ``T.ptx_wait_group(n)`` waits until at most the ``n`` latest
of the copies issued before it may still be in flight (each ``T.async_copy`` is one group,
as TileLang commits each).

A program may read (or write) the tile only after a wait that covers its copy. That is
checked here, along every path of the program (a loop's body as its first and its later
iterations, both arms of a branch): a statement that names the tile while its copy may be
in flight is a CompileError at that line, on the GPU and in the simulator alike, for it
reads memory a copy is still writing.

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
                                     statement_lists)
from tilejit.frontend.static_prologue import evaluate_static

_ISSUED = "__tj_async_tile_copy"      # the attribute marking a T.copy made from one


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

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not is_call_to(node, T.async_copy, self.ks.namespace):
            return node
        sig = "T.async_copy(src, dst, *, coalesced_width=None, annotations=None, loop_layout=None)"
        args = list(node.args)
        keywords = []
        for k in node.keywords:
            if k.arg in ("src", "dst") and len(args) < 2:
                args.append(k.value)
            elif k.arg in ("coalesced_width", "annotations", "loop_layout"):
                keywords.append(k)
            else:
                raise self.ks.error(f"{sig}: unexpected argument {k.arg!r}", node)
        if len(args) != 2:
            raise self.ks.error(f"{sig} takes a source and a destination, got {len(args)} "
                                "positional argument(s)", node)
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


class _Check:
    """Walks the statements with the copies that may be in flight (the destination tiles,
    oldest first) and reports the first statement that names one of them."""

    def __init__(self, ks, keep_waits):
        self.ks, self.keep_waits = ks, keep_waits
        self.runtime = assigned_names(ks.tree) | set(ks.params)
        self.dropped = set()        # ids of the waits and commits to take out

    def body(self, stmts, pending):
        for stmt in stmts:
            pending, keep = self.statement(stmt, pending)
            if not keep:
                self.dropped.add(id(stmt))
        return pending

    def drop(self, tree):
        for stmts in list(statement_lists(tree)):
            kept = [s for s in stmts if id(s) not in self.dropped]
            stmts[:] = kept or [ast.copy_location(ast.Pass(), stmts[0])]

    def statement(self, stmt, pending):
        issued = getattr(stmt.value, _ISSUED, None) if isinstance(stmt, ast.Expr) else None
        if issued is not None:
            self.names(stmt.value, pending, stmt)
            return _merge(pending, [(issued, stmt)]), True
        wait = _call_of(self.ks, stmt, T.ptx_wait_group)
        if wait is not None:
            return self.wait(wait, pending), self.keep_waits
        if _call_of(self.ks, stmt, T.ptx_commit_group) is not None:
            return pending, self.keep_waits
        if isinstance(stmt, (ast.For, ast.While)):
            self.names(stmt.iter if isinstance(stmt, ast.For) else stmt.test, pending, stmt)
            first = self.body(stmt.body, pending)
            later = self.body(stmt.body, _merge(pending, first))
            if stmt.orelse:
                self.body(stmt.orelse, _merge(pending, later))
            return _merge(pending, later), True
        if isinstance(stmt, ast.If):
            self.names(stmt.test, pending, stmt)
            a = self.body(stmt.body, pending)
            b = self.body(stmt.orelse, pending) if stmt.orelse else pending
            return _merge(a, b), True
        if isinstance(stmt, ast.With):
            for item in stmt.items:
                self.names(item.context_expr, pending, stmt)
            return self.body(stmt.body, pending), True
        self.names(stmt, pending, stmt)
        return pending, True

    def wait(self, call, pending):
        n = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "num"), None)
        n = self.static(n) if n is not None else None
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise self.ks.error("T.ptx_wait_group(num): num is the number of copy groups that "
                                "may stay in flight, a non-negative int known at compile time",
                                call)
        return pending[len(pending) - n:] if n else []

    def static(self, expr):
        """``expr``'s value where it reads only compile-time names (``stages - 2``)."""
        value, known = evaluate_static(copy.deepcopy(expr), dict(self.ks.namespace),
                                       self.runtime)
        return value if known else None

    def names(self, node, pending, stmt):
        if not pending:
            return
        flight = {name: where for name, where in pending}
        for n in syntax.walk(node):
            if isinstance(n, ast.Name) and n.id in flight:
                raise self.ks.error(
                    f"'{n.id}' is used while the T.async_copy into it (line "
                    f"{flight[n.id].lineno}) may still be in flight: wait for it first "
                    f"(T.ptx_wait_group(0)); a tile is in flight as a whole, so give each "
                    f"stage of a double buffer a tile of its own", stmt)


def _merge(a, b):
    out = list(a)
    for item in b:
        if all(item[1] is not x[1] for x in out):
            out.append(item)
    return out


def _allocated(ks, fn):
    return {t.id for node in syntax.walk(ks.tree) if isinstance(node, ast.Assign)
            and is_call_to(node.value, fn, ks.namespace)
            for t in node.targets if isinstance(t, ast.Name)}


def rewrite_async_tile_copies(ks: KernelSource) -> None:
    """The kernel's ``T.async_copy`` statements as checked ``T.copy`` (module docstring)."""
    ks.namespace.setdefault("__tj_tile_copy", T.copy)
    shared = _allocated(ks, T.alloc_shared)
    ks.tree = _Issue(ks, shared, set(ks.params)).visit(ks.tree)
    keep = any(is_call_to(n, T.ptx_cp_async, ks.namespace) for n in syntax.walk(ks.tree))
    check = _Check(ks, keep)
    check.body(ks.tree.body, [])
    check.drop(ks.tree)

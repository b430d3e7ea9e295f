"""Pass: a tile operation inside a branch that only some of the block's threads take,
``if tx < 128: T.copy(A[...], S)`` with ``tx = T.get_thread_binding()``.

A tile operation is the block's: the compiler spreads its elements over every thread, so
under such a branch the other threads' share would silently not be done. TileLang maps
the operation onto the threads of the range instead. Where the branch's test is a
comparison of the thread index with compile-time values (evaluated here for each thread
of the block) that a contiguous range of threads passes, its ``T.copy``, ``T.fill``,
``T.clear`` and ``T.Parallel`` on shared tiles and tensors are done by those threads
(``thread_ranges.py``; the ``else`` branch likewise by the rest, when they are a range);
any other tile operation there (on a fragment, a gemm, a reduction) is a CompileError
naming the operation, the test and the threads that take it, as the simulator refuses it
(``sim/threads.block_wide``). A test that every thread passes (``if tx < 256`` in a
block of 256) is left alone.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.analysis import settled
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import THREAD_INDEX
from tilejit.language.tiles import TILE_OPERATIONS
from tilejit.frontend.thread_tests import thread_names, thread_takers
from tilejit.passes.thread_ranges import partition
from tilejit.passes.tile_allocation import ALLOCATION_KINDS

_TILE_OPS = {getattr(T, name): name for name in TILE_OPERATIONS}


# a thread's own when it moves or sets only its T.alloc_local tile and tensors: each
# thread moves or sets every element of its own array (``codegen/lowering/copy.py``); a
# copy between its tile and a shared one stays the block's (the barrier after it must be
# every thread's)
_OWN_OPS = (T.copy, T.fill, T.clear)


def _tile_op(stmts, namespace, own=None):
    """The first tile operation (its name) among ``stmts`` and what they contain, the
    branches of compile-time ``if``s (``if copy:``) that are not taken left out, and
    operations on a thread's own tiles (``own``: the kernel's tiles by kind,
    ``_tiles_by_kind``)."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            truth = settled(stmt.test, namespace)
            inner = [stmt.body, stmt.orelse] if truth is None else [
                stmt.body if truth else stmt.orelse]
            for block in inner:
                op = _tile_op(block, namespace, own)
                if op is not None:
                    return op
            continue
        for node in syntax.walk(stmt):
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                    resolve_static(node.iter.func, namespace) is T.Parallel:
                return "Parallel"
            if isinstance(node, ast.Call):
                fn = resolve_static(node.func, namespace)
                if own is not None and fn in _OWN_OPS and _threads_own(fn, node, own):
                    continue
                if fn in _ATOMICS and _element_atomic(node, own or {}):
                    continue                    # an element's: each thread's own
                if fn in _TILE_OPS and not (fn is T.sync_threads and
                                            (node.args or node.keywords)):
                    return _TILE_OPS[fn]        # a named barrier is some threads' own
    return None


_ATOMICS = (T.atomic_add, T.atomic_max, T.atomic_min)


def _element_atomic(node, tiles) -> bool:
    """``T.atomic_add(C[i, j], v)``: one element (no slice) and a value that is not a
    tile (with a tile, ``C[i, j]`` is the corner of a region of its shape)."""
    if len(node.args) < 2 or not isinstance(node.args[0], ast.Subscript):
        return False
    def sliced(sub):
        parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        return any(isinstance(p, ast.Slice) for p in parts)
    value = node.args[1]
    return not sliced(node.args[0]) and not (
        isinstance(value, ast.Subscript) and sliced(value)) and not (
        isinstance(value, ast.Name) and value.id in tiles)


def _threads_own(fn, node, tiles) -> bool:
    """Whether a T.copy / T.fill / T.clear touches a thread's own tile and no block tile:
    T.fill(L, v), T.clear(L), T.copy between L and a tensor or another local tile."""
    def kind(arg):
        base = arg.value if isinstance(arg, ast.Subscript) else arg
        return tiles.get(base.id) if isinstance(base, ast.Name) else "other"
    operands = [kind(a) for a in node.args[:2 if fn is T.copy else 1]]
    return "local" in operands and not {"shared", "fragment", "other"} & set(operands)


def _tiles_by_kind(fdef, namespace) -> dict:
    """name -> "local" / "shared" / "fragment" of the kernel's tiles (other names: its
    tensors)."""
    return {node.targets[0].id: ALLOCATION_KINDS[fn] for node in syntax.walk(fdef)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
            and (fn := resolve_static(node.value.func, namespace)) in ALLOCATION_KINDS}


def _test_text(ctx, node) -> str:
    """The branch's test as the kernel writes it (``if T.get_thread_binding() < 32``),
    the line's comment and colon left out."""
    line = ctx.source_line(node.lineno).split("#")[0].strip().rstrip(":").strip()
    return line if line.startswith(("if ", "elif ")) else f"if {ast.unparse(node.test)}"


def check_thread_branches(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    names = thread_names(fdef)
    if not names and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                             and n.func.id == THREAD_INDEX for n in syntax.walk(fdef)):
        return fdef
    threads = ctx.plan.launch_threads or ctx.threads
    _Branches(ctx, fdef, names, threads).visit(fdef)
    return fdef


class _Branches(syntax.NodeVisitor):
    def __init__(self, ctx, fdef, names, threads):
        self.ctx, self.fdef, self.names, self.threads = ctx, fdef, names, threads
        self.own = _tiles_by_kind(fdef, ctx.namespace)

    def _op(self, stmts):
        return _tile_op(stmts, self.ctx.namespace, self.own)

    def visit_If(self, node):
        op = self._op(node.body) or self._op(node.orelse)
        takers = None if op is None else thread_takers(node.test, self.names, self.threads,
                                                  self.ctx.namespace)
        if takers is None or len(takers) in (0, self.threads):
            self.generic_visit(node)
            return
        everyone = range(self.threads)
        for field, mine in (("body", takers), ("orelse", sorted(set(everyone) - set(takers)))):
            stmts = getattr(node, field)
            if not stmts or self._op(stmts) is None:
                continue
            lo, hi = mine[0], mine[-1] + 1
            new = partition(self.ctx, self.fdef, stmts, lo, hi) \
                if mine == list(range(lo, hi)) else None
            if new is None or self._op(new) is not None:
                self._refuse(node, self._op(stmts), mine)
            setattr(node, field, new)

    def _refuse(self, node, op, takers):
        span = (f"{takers[0]}…{takers[-1]}" if takers == list(range(takers[0], takers[-1] + 1))
                else f"{len(takers)} of them")
        raise self.ctx.error(
            f"T.{op} inside a branch that depends on the thread index "
            f"(`{_test_text(self.ctx, node)}`: threads {span} of the block's "
            f"{self.threads}): "
            f"tilejit does a T.copy, T.fill, T.clear or T.Parallel on shared tiles and "
            f"tensors with the threads of a range of them, but not this one (a fragment's "
            f"layout spreads it over the whole block; a gemm or a reduction is the "
            f"block's); split the block with warpgroup roles (`with T.ws(k):`) or move the "
            f"operation out of the branch", node)

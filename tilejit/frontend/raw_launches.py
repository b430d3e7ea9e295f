"""Launches written as TVM's TIR writes them, with no ``with T.Kernel(...)``.

A TileLang kernel may open its launch with the loops that bind the block and thread
indices instead of ``T.Kernel``::

    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            ...

or with ``bx = T.launch_thread("blockIdx.x", 4)`` statements (``with
T.launch_thread(...) as bx:`` too). The launch is the T.Kernel whose grid and block are
the extents bound (an axis bound twice must be bound with the same extent; one not bound
is 1): the loop nest is its body, or, from the first ``T.launch_thread`` statement, the
rest of the function's. A kernel has one launch: a statement after the loop nest (other
than ``return``) is an error, as is a binding the function's body does not open with.
Each binding becomes the index it binds (``T.thread_binding(start, stop, thread=...)``,
an expression: the loop spans the launch, so no thread is guarded out), which
``thread_bindings.py`` rewrites as inside any T.Kernel. Inside a ``T.Kernel``,
``T.launch_thread(axis, n)`` is that index too, ``n`` checked against the kernel's
extent where both are known at compile time.
"""
from __future__ import annotations

import ast
import copy

import numpy as np

from tilejit import syntax
from tilejit.frontend.source import (KernelSource, assigned_names, flatten_statements,
                                     is_call_to, is_launch, resolve_static)
from tilejit.frontend.static_prologue import evaluate_static
from tilejit import language as TL
from tilejit.language import threads as TH

_AXES = {**{a: ("thread", d) for a, d in TH.THREAD_AXES.items()},
         **{a: ("block", d) for a, d in TH.BLOCK_AXES.items()}}
_BINDING = "__tj_raw_thread_binding"
_KERNEL = "__tj_raw_kernel"
MAX_THREADS = 1024


def _is_binding(ks, node) -> bool:
    return is_call_to(node, TH.thread_binding, ks.namespace) or \
        is_call_to(node, TH.launch_thread, ks.namespace)


def _opening(ks, stmt):
    """The binding call a statement of the function's body opens a launch with: a
    ``for`` over ``T.thread_binding``, ``x = T.launch_thread(...)`` (or annotated), or
    ``with T.launch_thread(...) as x``; else None."""
    if isinstance(stmt, ast.For) and is_call_to(stmt.iter, TH.thread_binding, ks.namespace):
        return stmt.iter
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) and stmt.value is not None \
            and _is_binding(ks, stmt.value):
        return stmt.value
    if isinstance(stmt, ast.With) and len(stmt.items) == 1 and \
            is_call_to(stmt.items[0].context_expr, TH.launch_thread, ks.namespace):
        return stmt.items[0].context_expr
    return None


def _arguments(call, names):
    args = dict(zip(names, call.args))
    for k in call.keywords:
        if k.arg in names and k.arg not in args:
            args[k.arg] = k.value
    return args


def axis_and_range(ks, call):
    """(axis, start, stop) of a ``T.thread_binding`` / ``T.launch_thread`` call, TVM's
    positional ``T.thread_binding(64, "threadIdx.x")`` included."""
    if resolve_static(call.func, ks.namespace) is TH.launch_thread:
        args = _arguments(call, ("thread", "extent"))
        if set(args) != {"thread", "extent"} or len(call.args) + len(call.keywords) != 2:
            raise ks.error("T.launch_thread(thread, extent) takes the axis (\"blockIdx.x\", "
                           "\"threadIdx.x\", ...) and its extent", call)
        start, stop, thread = ast.Constant(0), args["extent"], args["thread"]
    else:
        args = _arguments(call, ("start", "stop", "thread"))
        start, stop, thread = args.get("start"), args.get("stop"), args.get("thread")
        if thread is None and isinstance(stop, ast.Constant) and isinstance(stop.value, str):
            stop, thread = None, stop           # TVM's T.thread_binding(n, "threadIdx.x")
        if stop is None:
            start, stop = ast.Constant(0), start
        if start is None:
            raise ks.error("T.thread_binding(start, stop, thread=...) needs its range", call)
    axis = thread.value if isinstance(thread, ast.Constant) else None
    if axis not in _AXES:
        raise ks.error(f"{ast.unparse(call.func)}: the axis is a string, \"blockIdx.x\" … "
                       f"\"blockIdx.z\" or \"threadIdx.x\" … \"threadIdx.z\"; got "
                       f"{ast.unparse(thread) if thread is not None else None}", call)
    return axis, start, stop


def _extent(start, stop):
    if isinstance(start, ast.Constant) and start.value == 0:
        return stop
    return ast.BinOp(copy.deepcopy(stop), ast.Sub(), copy.deepcopy(start))


class _Static:
    """An expression's int value where it reads only the program's compile-time names
    (``static_prologue.evaluate_static``), else None."""

    def __init__(self, ks):
        self.namespace = ks.namespace
        self.runtime = assigned_names(ks.tree) | set(ks.params)

    def __call__(self, expr):
        # the extents this pass builds (`stop - start`, the 1 of an axis not bound) have
        # no line of their own: the evaluation compiles them
        value, known = evaluate_static(ast.fix_missing_locations(copy.deepcopy(expr)),
                                       dict(self.namespace), self.runtime)
        if isinstance(value, np.integer):
            value = int(value)
        return value if known and isinstance(value, int) and not isinstance(value, bool) \
            else None


def _same_extent(static, a, b) -> bool:
    va, vb = static(a), static(b)
    if va is not None and vb is not None:
        return va == vb
    return ast.dump(a) == ast.dump(b)


def _launch_extents(ks, region, static):
    """{axis: (extent, the first binding of it)} over every binding in the region, one
    extent per axis."""
    found = {}
    for stmt in region:
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Call) and _is_binding(ks, node):
                axis, start, stop = axis_and_range(ks, node)
                extent = _extent(start, stop)
                if axis in found and not _same_extent(static, found[axis][0], extent):
                    raise ks.error(f"{axis} is bound with extent {ast.unparse(extent)} here "
                                   f"and {ast.unparse(found[axis][0])} at line "
                                   f"{found[axis][1].lineno}: a launch has one extent per "
                                   "axis", node)
                found.setdefault(axis, (extent, node))
    return found


def _check_host_extents(ks, region, found):
    """The launch's extents are computed before it starts: one that reads a name the
    launch's own statements bind (an index, a value assigned inside) is an error at it."""
    bound = {n.id for stmt in region for n in syntax.walk(stmt)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for axis, (extent, binding) in found.items():
        inner = sorted({n.id for n in syntax.walk(extent)
                        if isinstance(n, ast.Name) and n.id in bound})
        if inner:
            raise ks.error(f"the extent of {axis}, `{ast.unparse(extent)}`, reads "
                           f"{', '.join(inner)}, which the launch itself binds; a launch's "
                           "extents are known before it starts (compute them before its "
                           "bindings, or from the kernel's arguments)", binding)


def _extents(found, kind):
    given = {d: e for a, e in found.items() for k, d in [_AXES[a]] if k == kind}
    if not given:
        return [ast.Constant(1)]
    return [given.get(d, ast.Constant(1)) for d in range(max(given) + 1)]


def _binding_expr(ks, call):
    """``T.thread_binding(start, stop, thread=axis)`` for a binding call."""
    axis, start, stop = axis_and_range(ks, call)
    return ast.copy_location(ast.Call(ast.Name(_BINDING, ast.Load()), [start, stop], [
        ast.keyword("thread", ast.Constant(axis))]), call)


class _Bindings(syntax.NodeTransformer):
    """In a launch's region: binding loops and ``with`` frames → their index assigned,
    then their body; ``T.launch_thread`` calls → the index. Inside a T.Kernel (``known``
    its extents per axis where known at compile time) only the calls, checked."""

    def __init__(self, ks, static, known=None, region=True):
        self.ks, self.static, self.known, self.region = ks, static, known, region

    def visit_For(self, node):
        if not (self.region and is_call_to(node.iter, TH.thread_binding, self.ks.namespace)):
            return self.generic_visit(node)
        if not isinstance(node.target, ast.Name) or node.orelse:
            raise self.ks.error("`for tx in T.thread_binding(...)` binds one name and has no "
                                "else clause", node)
        bind = ast.copy_location(ast.Assign([ast.Name(node.target.id, ast.Store())],
                                            _binding_expr(self.ks, node.iter)), node)
        return [bind] + flatten_statements([self.visit(s) for s in node.body])

    def visit_With(self, node):
        item = node.items[0] if len(node.items) == 1 else None
        if item is None or not is_call_to(item.context_expr, TH.launch_thread, self.ks.namespace):
            return self.generic_visit(node)
        if not isinstance(item.optional_vars, ast.Name):
            raise self.ks.error("`with T.launch_thread(axis, n) as x:` binds one name", node)
        call = self.visit(item.context_expr)
        bind = ast.copy_location(ast.Assign([ast.Name(item.optional_vars.id, ast.Store())],
                                            call), node)
        return [bind] + flatten_statements([self.visit(s) for s in node.body])

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not is_call_to(node, TH.launch_thread, self.ks.namespace):
            return node
        axis, start, stop = axis_and_range(self.ks, node)
        if self.known is not None:
            have = self.known.get(axis, 1)
            want = self.static(stop)
            if isinstance(want, int) and isinstance(have, int) and want != have:
                kind, _ = _AXES[axis]
                what = "block has" if kind == "thread" else "grid has"
                raise self.ks.error(f"T.launch_thread(\"{axis}\", {want}): the kernel's {what} "
                                    f"{have} along {axis[-1]} (T.Kernel's); launch the same "
                                    "number", node)
        return _binding_expr(self.ks, node)


def _kernel_extents(ks, static, launch):
    """{axis: extent} of a T.Kernel call, the extents known at compile time."""
    known = {}
    for d, e in enumerate(launch.args):
        known[f"blockIdx.{'xyz'[d]}"] = static(e)
    threads = next((k.value for k in launch.keywords if k.arg == "threads"), None)
    dims = [ast.Constant(128)] if threads is None else list(threads.elts) \
        if isinstance(threads, (ast.Tuple, ast.List)) else [threads]
    value = static(threads) if isinstance(threads, ast.Name) else None
    if isinstance(threads, ast.Name) and value is None:
        value = ks.namespace.get(threads.id)
        if isinstance(value, (tuple, list)):
            dims = [ast.Constant(v) for v in value]
    for d, e in enumerate(dims[:3]):
        known[f"threadIdx.{'xyz'[d]}"] = static(e)
    return known


def rewrite_raw_launches(ks: KernelSource) -> None:
    """The kernel's TIR-style launch as a ``with T.Kernel(...)`` block, and its
    ``T.launch_thread`` calls as bindings (see the module's docstring)."""
    body = ks.tree.body
    ks.made.setdefault(_BINDING, TH.thread_binding)
    ks.made.setdefault(_KERNEL, TL.Kernel)
    ks.namespace.update({_BINDING: TH.thread_binding, _KERNEL: TL.Kernel})
    static = _Static(ks)
    kernels = [s for s in body if isinstance(s, ast.With)
               and any(is_launch(i.context_expr, ks.namespace) for i in s.items)]
    if kernels:
        known = _kernel_extents(ks, static, kernels[0].items[0].context_expr)
        _Bindings(ks, static, known, region=False).visit(kernels[0])
        return
    start = next((i for i, s in enumerate(body) if _opening(ks, s) is not None), None)
    if start is None:
        top = next((s for s in body if any(_is_binding(ks, n) for n in syntax.walk(s))),
                   None)
        if top is not None and not isinstance(top, (ast.For, ast.While, ast.If)):
            raise ks.error("a launch opens with one binding per statement: `bx = "
                           "T.launch_thread(\"blockIdx.x\", n)`, `with T.launch_thread(...) "
                           "as bx:` (one item) or `for bx in T.thread_binding(...)`", top)
        inner = next((n for n in syntax.walk(ks.tree) if _is_binding(ks, n)), None)
        if inner is not None:
            raise ks.error("a kernel with no `with T.Kernel(...)` is launched by the "
                           "T.thread_binding loops (or T.launch_thread statements) its body "
                           "opens with, at the top level of the function; this one is nested "
                           "in another statement", inner)
        return
    stop = len(body)
    while stop > start and isinstance(body[stop - 1], ast.Return):
        stop -= 1
    region = body[start:stop]
    if isinstance(region[0], (ast.For, ast.With)) and len(region) > 1:
        raise ks.error("a kernel launched by its binding loops has one launch, the loop nest "
                       f"at line {region[0].lineno}: this statement after it would be another "
                       "(put it inside the nest, or in a kernel of its own)", region[1])
    bindings = _launch_extents(ks, region, static)
    _check_host_extents(ks, region, bindings)
    found = {axis: extent for axis, (extent, _) in bindings.items()}
    grid, threads = _extents(found, "block"), _extents(found, "thread")
    counts = [static(t) for t in threads]
    for axis, (extent, binding) in bindings.items():
        count = static(extent)
        if isinstance(count, int) and count < 1:
            text = ast.unparse(extent)
            text += "" if text == str(count) else f" = {count}"
            raise ks.error(f"{axis} is bound with extent {text}: an extent of a launch is "
                           "at least 1", binding)
    if all(isinstance(c, int) for c in counts):
        total = 1
        for c in counts:
            total *= c
        if not 1 <= total <= MAX_THREADS:
            raise ks.error(f"the launch's block has {total} threads "
                           f"({' × '.join(map(str, counts))}, the threadIdx extents bound); "
                           f"a block has 1 to {MAX_THREADS}", region[0])
    kernel = ast.Call(ast.Name(_KERNEL, ast.Load()), grid,
                      [ast.keyword("threads", threads[0] if len(threads) == 1 else
                                   ast.Tuple(threads, ast.Load()))])
    inner = flatten_statements([_Bindings(ks, static).visit(s) for s in region])
    with_ = ast.copy_location(ast.With([ast.withitem(kernel, None)], inner), region[0])
    ast.copy_location(kernel, region[0])
    ast.fix_missing_locations(with_)
    ks.tree.body = body[:start] + [with_] + body[stop:]

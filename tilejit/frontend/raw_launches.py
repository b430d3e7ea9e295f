"""Launches written as TVM's TIR writes them, with no ``with T.Kernel(...)``.

A TileLang kernel may open its launch with the loops that bind the block and thread
indices instead of ``T.Kernel``::

    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            ...

or with ``bx = T.launch_thread("blockIdx.x", 4)`` statements. The statements from the
first such binding to the end are the kernel's body; the launch is the T.Kernel whose
grid and block are the bindings' extents (an axis bound twice must be bound with the same
extent; one not bound is 1). The loops stay where they are: ``thread_bindings.py`` turns
each into its index (and a thread loop's ``if tx < stop``). Inside a ``T.Kernel`` (or
after this rewrite) ``T.launch_thread(axis, n)`` is ``T.thread_binding(0, n,
thread=axis)``; a thread axis launched with an extent other than T.Kernel's is an error.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.frontend.source import KernelSource, is_launch, resolve_static
from tilejit import language as TL
from tilejit.language import threads as TH

_AXES = {**{a: ("thread", d) for a, d in TH.THREAD_AXES.items()},
         **{a: ("block", d) for a, d in TH.BLOCK_AXES.items()}}


def _language_call(ks, node, fn) -> bool:
    return isinstance(node, ast.Call) and resolve_static(node.func, ks.namespace) is fn


def _binding_of(ks, node):
    """The ``T.thread_binding`` / ``T.launch_thread`` call a statement opens with, if any:
    a ``for ... in T.thread_binding(...)`` loop, or ``x = T.launch_thread(...)``."""
    if isinstance(node, ast.For) and _language_call(ks, node.iter, TH.thread_binding):
        return node.iter
    if isinstance(node, (ast.Assign, ast.Expr)) and (
            _language_call(ks, node.value, TH.launch_thread)
            or _language_call(ks, node.value, TH.thread_binding)):
        return node.value
    return None


def _arguments(ks, call, names):
    args = dict(zip(names, call.args))
    for k in call.keywords:
        if k.arg in names and k.arg not in args:
            args[k.arg] = k.value
    return args


def _axis_extent(ks, call):
    """(axis name, extent expression) of a binding call."""
    if resolve_static(call.func, ks.namespace) is TH.launch_thread:
        args = _arguments(ks, call, ("thread", "extent"))
        if set(args) != {"thread", "extent"} or len(call.args) + len(call.keywords) != 2:
            raise ks.error("T.launch_thread(thread, extent) takes the axis (\"blockIdx.x\", "
                           "\"threadIdx.x\", ...) and its extent", call)
        start, stop, thread = ast.Constant(0), args["extent"], args["thread"]
    else:
        args = _arguments(ks, call, ("start", "stop", "thread"))
        start, stop, thread = args.get("start"), args.get("stop"), args.get("thread")
        if stop is None:
            start, stop = ast.Constant(0), start
        if start is None:
            raise ks.error("T.thread_binding(start, stop, thread=...) needs its range", call)
    axis = thread.value if isinstance(thread, ast.Constant) else None
    if axis not in _AXES:
        raise ks.error(f"{ast.unparse(call.func)}: the axis is a string, \"blockIdx.x\" … "
                       f"\"blockIdx.z\" or \"threadIdx.x\" … \"threadIdx.z\"; got "
                       f"{ast.unparse(thread) if thread is not None else None}", call)
    if isinstance(start, ast.Constant) and start.value == 0:
        return axis, stop
    return axis, ast.BinOp(stop, ast.Sub(), start)


def _launch_extents(ks, region):
    """{axis: extent} over every binding in the region, one extent per axis."""
    found = {}
    for stmt in region:
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Call) and (_language_call(ks, node, TH.thread_binding) or
                                               _language_call(ks, node, TH.launch_thread)):
                axis, extent = _axis_extent(ks, node)
                if axis in found and ast.dump(found[axis][0]) != ast.dump(extent):
                    raise ks.error(f"{axis} is bound with extent {ast.unparse(extent)} here "
                                   f"and {ast.unparse(found[axis][0])} at line "
                                   f"{found[axis][1].lineno}: a launch has one extent per "
                                   "axis", node)
                found.setdefault(axis, (extent, node))
    return {axis: extent for axis, (extent, _) in found.items()}


def _extents(found, kind):
    given = {d: e for a, e in found.items() for k, d in [_AXES[a]] if k == kind}
    if not given:
        return [ast.Constant(1)]
    return [given.get(d, ast.Constant(1)) for d in range(max(given) + 1)]


def _sibling(func, name, fallback):
    """``T.<name>`` where the kernel wrote ``T.<something>`` (the module as the kernel names
    it), else the front end's name for the object."""
    if isinstance(func, ast.Attribute):
        return ast.Attribute(copy.deepcopy(func.value), name, ast.Load())
    return ast.Name(fallback, ast.Load())


class _LaunchThreads(syntax.NodeTransformer):
    """``T.launch_thread(axis, n)`` → ``T.thread_binding(0, n, thread=axis)``."""

    def __init__(self, ks, threads):
        self.ks, self.threads = ks, threads

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not _language_call(self.ks, node, TH.launch_thread):
            return node
        axis, extent = _axis_extent(self.ks, node)
        kind, dim = _AXES[axis]
        if kind == "thread" and self.threads is not None:
            have = self.threads[dim] if dim < len(self.threads) else 1
            try:
                want = ast.literal_eval(extent)
            except ValueError:
                want = None
            if isinstance(want, int) and isinstance(have, int) and want != have:
                raise self.ks.error(f"T.launch_thread(\"{axis}\", {want}): the kernel's "
                                    f"block has {have} thread(s) along {axis[-1]} "
                                    "(T.Kernel's threads=); launch the same number", node)
        func = _sibling(node.func, "thread_binding", "__tj_threads")
        return ast.copy_location(ast.Call(func, [ast.Constant(0), extent], [
            ast.keyword("thread", ast.Constant(axis))]), node)


def _literal_threads(ks, launch):
    threads = next((k.value for k in launch.keywords if k.arg == "threads"), None)
    try:
        value = 128 if threads is None else ast.literal_eval(threads)
    except ValueError:
        value = ks.namespace.get(threads.id) if isinstance(threads, ast.Name) else None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def rewrite_raw_launches(ks: KernelSource) -> None:
    """The kernel's TIR-style launch as a ``with T.Kernel(...)`` block, and its
    ``T.launch_thread`` calls as bindings (see the module's docstring)."""
    body = ks.tree.body
    ks.namespace.setdefault("__tj_threads", TH.thread_binding)
    ks.namespace.setdefault("__tj_kernel", TL.Kernel)
    kernels = [s for s in body if isinstance(s, ast.With)
               and any(is_launch(i.context_expr, ks.namespace) for i in s.items)]
    if kernels:
        with_ = kernels[0]
        _LaunchThreads(ks, _literal_threads(ks, with_.items[0].context_expr)).visit(with_)
        return
    start = next((i for i, s in enumerate(body) if _binding_of(ks, s) is not None), None)
    if start is None:
        return
    stop = len(body)
    while stop > start and isinstance(body[stop - 1], ast.Return):
        stop -= 1
    region = body[start:stop]
    found = _launch_extents(ks, region)
    grid, threads = _extents(found, "block"), _extents(found, "thread")
    kernel = ast.Call(_sibling(_binding_of(ks, body[start]).func, "Kernel", "__tj_kernel"),
                      grid,
                      [ast.keyword("threads", threads[0] if len(threads) == 1 else
                                   ast.Tuple(threads, ast.Load()))])
    with_ = ast.With([ast.withitem(kernel, None)], region)
    ast.copy_location(with_, region[0])
    ast.copy_location(kernel, region[0])
    ast.fix_missing_locations(with_)
    literal = _literal_threads(ks, kernel)
    ks.tree.body = body[:start] + [_LaunchThreads(ks, literal).visit(with_)] + body[stop:]

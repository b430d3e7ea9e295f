"""``for i, j in T.Parallel(m, n, loop_layout=F)``: TileLang's own layout of a parallel
loop, a ``T.Fragment`` over the loop's extents. Iteration ``(i, j)`` runs on thread
``F``'s ``forward_thread(i, j)`` as its local index ``forward_index(i, j)``-th, as a
fragment of the loop's shape laid out by ``F`` would hold it.

Where the results of the iterations do not depend on which thread runs them the layout
is only a schedule; where they do it is the program's meaning, and tilejit keeps it
(``observable``): a warp primitive in the body (``T.shfl_xor(x, 1)`` reads the
iteration the neighbouring lane runs at the same local index), the thread index read in
a kernel that reads it, a fragment the loop indexes (it takes the loop's layout; one
whose layout is fixed otherwise, a gemm's accumulator, must have this one, or the
compile stops naming both, as TileLang's layout inference does). A loop of none of these,
an element map over shared or global memory, keeps tilejit's own schedule (16-byte
accesses, ``codegen/lowering/parallel.py``): its results are the same either way.

The layout is evaluated at compile time (``user_layouts.AnnotationScope``), checked
against the loop (its extents, in order, are the layout's shape: a nest of T.Parallel
loops is one loop, ``frontend/parallel_nests.py``, and the annotation sits on the outer
one, as TileLang requires) and the kernel (every thread below the kernel's thread
count), and expressed as a digit layout (``user_fragments.fragment_digits``). The loop
then iterates a stand-in fragment of its shape whose layout is fixed to it
(``layout_inference``). The simulator runs the loop's iterations on the same threads
(``sim/runtime.parallel_vectorized``), so its warp primitives exchange what the GPU's do
(``sim/warp.py``).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import THREAD_INDEX
from tilejit.language import threads as _threads
from tilejit.language import warp as _warp
from tilejit.language.fragment_layout import Fragment as UserFragment
from tilejit.language.layout import Layout as UserLayout
from tilejit.passes.user_fragments import fragment_digits


def loop_layout_node(loop) -> ast.expr | None:
    """The ``loop_layout=`` expression of a ``T.Parallel`` loop, or None."""
    it = loop.iter
    if not isinstance(it, ast.Call):
        return None
    return next((k.value for k in it.keywords if k.arg == "loop_layout"), None)


# what reads which thread runs the code: the warp primitives, the thread index
_THREAD_READS = frozenset(
    [getattr(_warp, n) for n in dir(_warp) if callable(getattr(_warp, n))
     and getattr(getattr(_warp, n), "__module__", None) == _warp.__name__]
    + [getattr(_threads, n) for n in ("get_thread_binding", "get_thread_bindings",
                                      "get_lane_idx", "get_warp_idx", "get_warp_idx_sync",
                                      "get_warp_group_idx")])


def reads_threads(tree, namespace) -> bool:
    """Whether ``tree`` calls a warp primitive or reads the thread index."""
    for n in syntax.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Name) and n.func.id == THREAD_INDEX:
            return True
        try:
            if resolve_static(n.func, namespace) in _THREAD_READS:
                return True
        except TypeError:           # an unhashable value called
            continue
    return False


def observable(loop, indexes_fragments: bool, kernel_reads_threads: bool, namespace) -> bool:
    """Whether the loop's ``loop_layout=`` shows in its results: it indexes fragments, its
    body calls a warp primitive, or the kernel reads the thread index (a value read in
    the body may hold it)."""
    return indexes_fragments or kernel_reads_threads or reads_threads(
        ast.Module(body=loop.body, type_ignores=[]), namespace)


def loop_layout(ctx, scope, loop, extents):
    """(the loop's digit layout, line, why) for its ``loop_layout=``; a ``CompileError``
    at the loop when the value is not a T.Fragment of the loop's extents in this kernel."""
    node = loop_layout_node(loop)
    text = ast.unparse(node)
    line = loop.lineno
    try:
        user = scope.value(node)
    except Exception as e:       # the user's code, whatever it raised
        raise ctx.error(f"T.Parallel(loop_layout=`{text}`): the layout must be known at "
                        f"compile time: {type(e).__name__}: {e}", line) from None
    if not isinstance(user, UserFragment):
        what = "a T.Layout (which lays out shared tiles)" if isinstance(user, UserLayout) \
            else repr(user)
        raise ctx.error(f"T.Parallel(loop_layout=`{text}`): expected a T.Fragment over the "
                        f"loop's extents, got {what}", line)
    if None in extents:
        raise ctx.error(f"T.Parallel(loop_layout=`{text}`): the loop's extents must be known "
                        f"at compile time to take a layout, got "
                        f"({', '.join(ast.unparse(a) for a in loop.iter.args)})", line)
    shape = tuple(int(e) for e in extents)
    if tuple(int(e) for e in user.get_input_shape()) != shape:
        raise ctx.error(f"T.Parallel(loop_layout=`{text}`): the T.Fragment has shape "
                        f"{list(user.get_input_shape())}, expected the loop's extents "
                        f"{list(shape)} (one input per index of the loop, nested T.Parallel "
                        f"loops counted as one loop)", line)
    layout = fragment_digits(ctx, user, shape, f"the loop_layout of the T.Parallel at line "
                             f"{line}", f"loop_layout of the T.Parallel at line {line}",
                             f"T.Parallel(loop_layout=`{text}`)", line)
    return layout, line, f"the loop_layout of the T.Parallel (`{text}`)"

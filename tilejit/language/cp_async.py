"""A thread's own asynchronous copies, as TileLang's hand-pipelined kernels write them
(its sparse-MLA and MLA-decode producers)::

    T.ptx_cp_async(T.access_ptr(KV_shared[s, r, c], "w", 8),
                   T.access_ptr(KV[b, i, g, c], "r", 8), 8)
    T.cp_async_barrier_noinc(bar_k_ready[s])

``T.ptx_cp_async`` copies ``num_elems`` consecutive elements (4, 8 or 16 bytes) of a
global tensor's row into a shared tile's, by this thread, without waiting (PTX
``cp.async``); with ``predicate`` false it writes zeros instead. The copy completes
later: a thread learns of its copies through ``T.cp_async_barrier_noinc(b)``, which
arrives on mbarrier ``b`` once all the thread's earlier copies have landed (an arrival
the barrier's count includes: PTX ``cp.async.mbarrier.arrive.noinc``), or through
``T.ptx_commit_group()`` and ``T.ptx_wait_group(n)`` (wait until at most ``n`` of its
committed groups are still in flight). ``T.access_ptr(A[i, j], mode, *extents)`` names
the element a copy starts at; it is an operand of ``T.ptx_cp_async`` only.

Declarations: the front end rewrites the copy (``frontend/async_copies.py``); the
simulator gives the forms their meaning (``sim/async_copies.py``), the GPU lowers them
(``codegen/lowering/async_copies.py``).
"""
from __future__ import annotations

from tilejit.language._semantics import meaning

CP_ASYNC_BYTES = (4, 8, 16)      # what one cp.async moves


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """The address of element ``base`` (``A[i, j]``) of a tensor or shared tile, read
    (``"r"``), written (``"w"``) or both; an operand of ``T.ptx_cp_async``."""
    raise TypeError("T.access_ptr(A[i, j], mode, ...) is an operand of T.ptx_cp_async inside "
                    "a kernel")


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """Copy ``num_elems`` elements (4, 8 or 16 bytes) from global memory to shared memory
    asynchronously, by this thread; ``predicate`` false: zeros instead."""
    raise TypeError("T.ptx_cp_async runs inside a kernel, with T.access_ptr operands")


def cp_async_barrier_noinc(barrier):
    """Arrive on mbarrier ``barrier`` once this thread's earlier ``T.ptx_cp_async``
    copies have landed (counted among the barrier's arrivals)."""
    return meaning("cp_async_barrier_noinc")(barrier)


def ptx_commit_group():
    """Close this thread's group of ``T.ptx_cp_async`` copies issued since the last."""
    return meaning("ptx_commit_group")()


def ptx_wait_group(num):
    """Wait until at most ``num`` of this thread's committed copy groups are in flight."""
    return meaning("ptx_wait_group")(num)


def async_copy(src, dst, *, coalesced_width=None, annotations=None, loop_layout=None):
    """TileLang's ``T.async_copy``: the block copies a global region into a shared tile
    without waiting for it (cp.async); ``T.ptx_wait_group(n)`` waits until at most the
    ``n`` latest such copies may still be in flight, and the tile may be used only after
    a wait covers its copy (``frontend/async_tile_copies.py`` checks that)."""
    raise TypeError("T.async_copy(src, dst) runs inside a kernel")

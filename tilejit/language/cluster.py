"""Thread block clusters (sm_90+), as TileLang spells them: ``T.ClusterKernel``,
``T.block_rank_in_cluster()``, the cluster barrier (``T.cluster_sync()``, or its halves
``T.cluster_arrive()`` / ``T.cluster_wait()``) and multicast loads,
``T.copy_cluster(src, dst, cluster_mask=m)``.

A cluster is ``cluster_dims`` consecutive blocks of the grid (x fastest) that the GPU
runs at once on one GPU processing cluster; one TMA load can land in the shared memory
of several of them (multicast), so an operand several blocks need crosses L2 once.

``T.copy_cluster(src, dst, cluster_mask=m)`` is TileLang's multicast load: the lowest
rank of the mask (the issuer) copies its region into the shared tile of every block of
the mask, so each of them receives the issuer's region, whatever region it names itself
(usually the same one: the tile of B the blocks of one GEMM row-panel share), and the
blocks of the mask make the same copies in the same order (the simulator checks it: a
copy the issuer never makes would leave the others waiting for ever). A block outside
the mask copies its own region, as ``T.copy``. The compiler issues the copy once from
the issuer into all of them in a warp-specialized TMA pipeline on sm_90a
(``passes/warp_specialize.py``); elsewhere each block of the mask loads the issuer's
region itself (``passes/clusters.py`` rewrites the region where the blocks name
different ones).
"""
from __future__ import annotations

import numbers

from tilejit.language._semantics import meaning

MAX_CLUSTER_BLOCKS = 8          # CUDA's portable cluster size (16 needs an opt-in)


def cluster_shape(cluster_dims) -> tuple:
    """``cluster_dims`` (an int or 1–3 ints) as a 3-tuple, checked: positive ints whose
    product is at most ``MAX_CLUSTER_BLOCKS``."""
    dims = tuple(cluster_dims) if isinstance(cluster_dims, (tuple, list)) else (cluster_dims,)
    if not 1 <= len(dims) <= 3 or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 1
            for d in dims):
        raise ValueError(f"T.ClusterKernel cluster_dims: expected 1 to 3 positive ints, got "
                         f"{cluster_dims!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER_BLOCKS:
        raise ValueError(f"T.ClusterKernel cluster_dims={dims}: {dims[0] * dims[1] * dims[2]} "
                         f"blocks per cluster, more than the {MAX_CLUSTER_BLOCKS} CUDA allows "
                         f"portably")
    return dims


def check_cluster_grid(grid, cluster) -> None:
    """Each grid extent a multiple of the cluster's (CUDA refuses the launch otherwise)."""
    for axis, (g, c) in enumerate(zip(grid, cluster)):
        if g % c:
            raise ValueError(f"T.ClusterKernel: grid extent {axis} ({'xyz'[axis]}) is {g}, not a "
                             f"multiple of cluster_dims[{axis}] = {c} (grid {tuple(grid)}, "
                             f"cluster_dims {tuple(cluster)})")


def check_cluster_mask(mask, cluster_blocks: int) -> int:
    """A multicast mask: a compile-time int naming blocks of the cluster (bit r: rank r)."""
    if isinstance(mask, bool) or not isinstance(mask, numbers.Integral) or mask <= 0:
        raise ValueError(f"T.copy_cluster cluster_mask: expected a positive int (bit r: the "
                         f"block of rank r), got {mask!r}")
    if mask >> cluster_blocks:
        raise ValueError(f"T.copy_cluster cluster_mask={mask:#b} names ranks beyond the "
                         f"cluster's {cluster_blocks} block(s)")
    return int(mask)


def block_rank_in_cluster():
    """This block's rank in its cluster: ``bx % cx + (by % cy) * cx + (bz % cz) * cx * cy``
    for ``cluster_dims`` (cx, cy, cz); 0 outside a cluster."""
    return meaning("block_rank_in_cluster")()


def copy_cluster(src, dst, *, cluster_mask=None, dst_block=None, remote_barrier=None):
    """``T.copy_cluster(A[...], A_shared, cluster_mask=m)``: a global → shared copy whose
    region, the mask's lowest rank's, every block of the mask receives (see the module's
    docstring). The
    copy of a shared tile into a peer block's (``dst_block=``, ``remote_barrier=``) is
    not built."""
    return meaning("copy_cluster")(src, dst, cluster_mask, dst_block, remote_barrier)


def cluster_arrive():
    """This thread arrives at the cluster barrier (release: its earlier writes are
    visible to the cluster's threads that wait after it)."""
    return meaning("cluster_barrier")("arrive")


def cluster_arrive_relaxed():
    """``T.cluster_arrive`` without the release ordering."""
    return meaning("cluster_barrier")("arrive_relaxed")


def cluster_wait():
    """Wait until every thread of every block of the cluster has arrived (acquire)."""
    return meaning("cluster_barrier")("wait")


def cluster_sync():
    """``T.cluster_arrive()`` then ``T.cluster_wait()``: a barrier of every thread of every
    block of the cluster (a block barrier too)."""
    return meaning("cluster_barrier")("sync")

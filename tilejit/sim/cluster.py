"""Thread block clusters in the simulator: ``T.block_rank_in_cluster()`` and the
multicast contract of ``T.copy_cluster`` (``language/cluster.py``).

The blocks of a launch run one after another, x fastest, so within a cluster a lower
rank always runs before a higher one. Each block of a copy's mask records the copies it
makes, in order, per (cluster, mask); the lowest rank of the mask issues them for all of
them (TileLang's multicast: its region goes to every block of the mask), so every other
rank's k-th copy receives the issuer's k-th region, whatever region it names itself. A
copy the issuer never made (or one it made that a rank of its mask never asks for:
checked when the launch ends), or a k-th copy made by another statement than the
issuer's k-th (a branch on the rank), is an error here; the source is a global tensor.
"""
from __future__ import annotations

import numpy as np

from tilejit.language.cluster import check_cluster_mask
from tilejit.sim import semantics
from tilejit.sim.block_races import block_id
from tilejit.sim.runtime import _INTERNAL, STATE, kernel_frame


def cluster_rank(block, cluster) -> int:
    (bx, by, bz), (cx, cy, cz) = block, cluster
    return bx % cx + (by % cy) * cx + (bz % cz) * cx * cy


def block_rank_in_cluster():
    return cluster_rank(STATE.block, STATE.cluster)


def _region_text(tensor, starts, extents) -> str:
    return f"{tensor.name}[{', '.join(f'{int(s)}:{int(s) + e}' for s, e in zip(starts, extents))}]"


def _site() -> tuple:
    """The statement being simulated, as the (file, line, instruction) of every frame
    outside the simulator and the language (``runtime.kernel_frame``'s rule: a kernel may
    live anywhere, tilejit's own files too), innermost first: a copy in a macro is told
    apart by the macro's call site, two calls on one line by the instruction. Its first
    entry is the copy's own line."""
    out, frame = [], kernel_frame(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_INTERNAL):
            out.append((frame.f_code.co_filename, frame.f_lineno, frame.f_lasti))
        frame = frame.f_back
    return tuple(out) or (("?", 0, 0),)


def copy_cluster(src, dst, cluster_mask, dst_block=None, remote_barrier=None):
    if dst_block is not None or remote_barrier is not None:
        raise NotImplementedError("T.copy_cluster(dst_block=..., remote_barrier=...): copies "
                                  "into a peer block's shared memory are not built; "
                                  "cluster_mask= (a multicast load) is")
    cluster = STATE.cluster
    blocks = cluster[0] * cluster[1] * cluster[2]
    mask = check_cluster_mask(cluster_mask, blocks)
    rank = cluster_rank(STATE.block, cluster)
    (s_t, s_start, s_ranged, s_ext), _ = semantics._resolve(src, dst, "T.copy_cluster")
    if s_t.kind is not None:
        raise TypeError(f"T.copy_cluster(cluster_mask=…): the source must be a global tensor "
                        f"or a region of one, got the {s_t.kind} tile {s_t.name}")
    if mask >> rank & 1:
        extents = [1] * len(s_t.shape)
        for d, e in zip(s_ranged, s_ext):
            extents[d] = int(e)
        region = (id(s_t), tuple(int(np.asarray(s)) for s in s_start), tuple(extents))
        text = _region_text(s_t, region[1], extents)
        key = (tuple(b // c for b, c in zip(STATE.block, cluster)), mask)
        ranks = STATE.multicasts.setdefault(key, {})
        mine = ranks.setdefault(rank, [])
        site = _site()
        issuer = (mask & -mask).bit_length() - 1
        if rank != issuer:
            theirs = ranks.get(issuer, [])
            k = len(mine)
            if k >= len(theirs):
                raise ValueError(
                    f"T.copy_cluster(cluster_mask={mask:#b}): block {STATE.block} (rank {rank} "
                    f"of its cluster) makes copy {k + 1} ({text}), but rank {issuer}, whose "
                    f"copies the mask's blocks receive, made {len(theirs)}")
            if theirs[k][3] != site:
                raise ValueError(
                    f"T.copy_cluster(cluster_mask={mask:#b}): block {STATE.block} (rank {rank} "
                    f"of its cluster) makes its copy {k + 1} at line {site[0][1]}, but rank "
                    f"{issuer}, whose copies the mask's blocks receive, made its copy {k + 1} "
                    f"at line {theirs[k][3][0][1]} (or from another call of it): the blocks "
                    f"of a mask make the same copies, in the same order")
            src = theirs[k][2]          # the issuer's region arrives here
        mine.append((region, text, src, site))
    semantics.copy(src, dst)


def check_multicasts_complete(multicasts) -> None:
    """When the launch ends: every rank of a mask asked for all the issuer's copies."""
    for (cluster, mask), ranks in multicasts.items():
        issuer = (mask & -mask).bit_length() - 1
        made = len(ranks.get(issuer, []))
        for rank in range(mask.bit_length()):
            if mask >> rank & 1 and len(ranks.get(rank, [])) != made:
                raise ValueError(
                    f"T.copy_cluster(cluster_mask={mask:#b}): in cluster {cluster}, rank "
                    f"{issuer} copied {made} region(s) to the mask's blocks, but rank {rank} "
                    f"asked for {len(ranks.get(rank, []))}; every block of the mask must make "
                    f"the same copies")


def cluster_barrier(kind):
    """The cluster barrier orders nothing here beyond the blocks' own order: the blocks
    run one after another (lower ranks first), and blocks of a cluster share no memory
    but the global tensors. A program that hands data through a global tensor from a
    higher rank to a lower one across the barrier computes differently here than on the
    GPU (and one that races across it is not reported). A wait (acquire) orders the
    block's later accesses to global tensors after its cluster's blocks' (``block_races.py``:
    a row one rank writes and another reads across the barrier is no race)."""
    if kind in ("wait", "sync"):
        STATE.cluster_waited.add(block_id())
    return None


MEANINGS = {"block_rank_in_cluster": block_rank_in_cluster, "cluster_barrier": cluster_barrier,
            "copy_cluster": semantics._block_wide("copy_cluster", copy_cluster)}

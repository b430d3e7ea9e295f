"""Which dimensions of each ``T.copy`` operand the copy runs over (shared by the
simulator and the compiler).

An operand is described by its rank, its ranged dimensions (all of a whole tensor or
tile; the sliced ones of a region; ``None`` for the start-index form ``A[r0, c0]``) and
its extents when known at compile time (a tile's shape). The copy's extent comes from
the operand that knows it; the start-index form ranges over the last dimensions.
Dimensions of extent 1 may appear on one side only (``Q[b, i:i+64, h, :]`` ↔ a 64 × d
tile).

Where a global region's extents differ from a tile's, TileLang runs the copy over the
tile's (its ``MakeIterVars``: the operand of the lower memory scope gives the loop's
range), the region taken from its start as far as the tile reaches, bounded by the
tensor: ``T.copy(A[r:r + 64, c:c + 64], S)`` into a 64 × 128 tile reads 128 columns
from c (those past the tensor as 0). Into a tile smaller than the region it is
TileLang's error as here (``tile_governs``)."""
from __future__ import annotations


class RegionError(ValueError):
    pass


def resolve_ranged(ndim, ranged, extents, other_extents, what="T.copy"):
    """(ranged dims, extents) of an operand whose extents come from the other side."""
    if ranged is None:
        k = len(other_extents)
        if k > ndim:
            squeezed = [e for e in other_extents if e != 1]
            if len(squeezed) > ndim:
                raise RegionError(f"{what}: a {ndim}-d region cannot hold a "
                                  f"{tuple(other_extents)} tile")
            other_extents, k = squeezed, len(squeezed)
        return list(range(ndim - k, ndim)), tuple(other_extents)
    if extents is not None:
        return list(ranged), tuple(extents)
    if len(ranged) == len(other_extents):
        return list(ranged), tuple(other_extents)
    squeezed = [e for e in other_extents if e != 1]
    if len(squeezed) != len(ranged):
        raise RegionError(f"{what}: the region has {len(ranged)} sliced dimension(s), the other "
                          f"operand's shape is {tuple(other_extents)}")
    return list(ranged), tuple(squeezed)


def copy_dims(src, dst, what="T.copy"):
    """``src``/``dst``: (ndim, ranged or None, extents or None). Returns
    ((src ranged, src extents), (dst ranged, dst extents), copy extents without 1s)."""
    s_nd, s_r, s_e = src
    d_nd, d_r, d_e = dst
    if s_e is None and d_e is None:
        raise RegionError(f"{what}: neither operand says how large the copy is: make one of "
                          f"them a tile, or slice a region")
    if s_e is None:
        s_r, s_e = resolve_ranged(s_nd, s_r, None, d_e, what)
    elif d_e is None:
        d_r, d_e = resolve_ranged(d_nd, d_r, None, s_e, what)
    s_nz = [e for e in s_e if e != 1]
    d_nz = [e for e in d_e if e != 1]
    if s_nz != d_nz:
        raise RegionError(f"{what}: the source's extent {tuple(s_e)} and the destination's "
                          f"{tuple(d_e)} differ")
    return (list(s_r), tuple(s_e)), (list(d_r), tuple(d_e)), tuple(s_nz)


def tile_governs(src_tile: bool, src_extents, dst_tile: bool, dst_extents) -> bool:
    """Whether a copy between a global region and a tile whose extents differ runs over
    the tile's extents, as TileLang's does (module docstring): one operand a tile, the
    other a global region, as many extents above 1 on each side, and a destination tile
    no smaller than the region in each of them."""
    if src_tile == dst_tile:
        return False
    s_nz = [e for e in src_extents if e != 1]
    d_nz = [e for e in dst_extents if e != 1]
    if len(s_nz) != len(d_nz):
        return False
    return src_tile or all(d >= s for s, d in zip(s_nz, d_nz))

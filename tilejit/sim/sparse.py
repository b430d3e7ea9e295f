"""``T.gemm_sp`` in the simulator: A expanded from its compressed form
(``language/sparse.py``) and multiplied as ``T.gemm`` multiplies. Metadata the tensor
cores leave undefined (positions of a group not in increasing order, a 32-bit group's
code other than 0b0100 and 0b1110) is an error naming the row and the group."""
from __future__ import annotations

import numpy as np

from tilejit.language.sparse import group_of, operand_error
from tilejit.sim.runtime import _caller_location
from tilejit.sim.semantics import _block_wide, _gemm_error, accumulate, gemm_reads, tile_view

# a 32-bit group's two codes: its value at position 0 or 1 (the tensor cores read a
# float32 pair as four 16-bit halves: positions (0, 1) or (2, 3))
_CODES_32 = {0b0100: 0, 0b1110: 1}


def expand(values: np.ndarray, meta: np.ndarray, a_dtype, e_dtype) -> np.ndarray:
    """The dense M x K matrix of compressed ``values`` (M x K/2) and ``meta`` (M x
    K/e_factor), both row-major along K."""
    elem, group = group_of(a_dtype)
    bits = e_dtype.bits
    per = bits // 4                                  # groups one metadata element holds
    M, kept = values.shape
    groups = kept // elem
    words = meta.astype(np.int64) & ((1 << bits) - 1)
    g = np.arange(groups)
    nibbles = (words[:, g // per] >> (4 * (g % per))) & 15          # M x groups
    dense = np.zeros((M, groups * group), dtype=values.dtype)
    rows = np.arange(M)[:, None]
    if elem == 1:
        pos = np.full(nibbles.shape, -1)
        for code, p in _CODES_32.items():
            pos[nibbles == code] = p
        bad = pos < 0
        if bad.any():
            _undefined(nibbles, bad, "0b0100 (the value at position 0) or 0b1110 (at 1)")
        dense[rows, group * g + pos] = values
        return dense
    first, second = nibbles & 3, nibbles >> 2
    bad = first >= second
    if bad.any():
        _undefined(nibbles, bad, "two positions in increasing order (bits 1:0 before "
                                 "bits 3:2)")
    dense[rows, group * g + first] = values[:, 0::2]
    dense[rows, group * g + second] = values[:, 1::2]
    return dense


def _undefined(nibbles, bad, want):
    m, g = (int(v) for v in np.argwhere(bad)[0])
    raise ValueError(f"T.gemm_sp: the metadata of row {m}, group {g} is "
                     f"{int(nibbles[m, g]):#06b}, which the sparse tensor cores leave "
                     f"undefined: each group's 4 bits must be {want} "
                     f"({int(bad.sum())} such group{'s' if bad.sum() > 1 else ''})"
                     f"{_caller_location(3)}")


def gemm_sp(A, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=None, clear_accum=False, k_pack=1, wg_wait=0):
    A, E, B, C = (tile_view(x, "T.gemm_sp") for x in (A, E, B, C))
    message = operand_error(A.data.shape, E.data.shape, B.data.shape, C.data.shape,
                            A.dtype, E.dtype, bool(transpose_A), bool(transpose_E),
                            bool(transpose_B))
    if message is not None:
        _gemm_error(message)
    gemm_reads((A, E, B), C, clear_accum)
    values = A.data.T if transpose_A else A.data
    meta = E.data.T if transpose_E else E.data
    dense = expand(values, meta, A.dtype, E.dtype)
    b = B.data.T if transpose_B else B.data
    accumulate(dense, b, A.dtype, C, clear_accum)


MEANINGS = {"gemm_sp": _block_wide("gemm_sp", gemm_sp)}   # the whole block's, as T.gemm

"""The simulator's XORWOW and MRG32k3a streams (``ir/random_generators.py`` has the
numbers; ``sim/random.py`` dispatches here for a kernel that draws from them).

A thread's row holds the generator's six state words (``ir/random_state.SEQUENTIAL``). A
step runs on every active row at once (numpy); ``curand_init`` and the jumps run per
row on Python integers. A ``T.Parallel`` iteration's words are read from the one stream
the block shares: one jump to the first word read, then steps, where the words read span
fewer than 2^16, else a jump for each.
"""
from __future__ import annotations

import numpy as np

from tilejit.ir import random_generators as g
from tilejit.ir import random_state as rs

S = rs.SEQUENTIAL
_STEPPED = 1 << 16


def _state(row, gen):
    words = [int(w) for w in row[S:S + rs.SEQUENTIAL_WORDS]]
    return (words[:5], words[5]) if gen == rs.XORWOW else (words[:3], words[3:])


def _store(row, gen, state):
    a, b = state
    row[S:S + rs.SEQUENTIAL_WORDS] = list(a) + ([b] if gen == rs.XORWOW else list(b))


def init(words, gen, seeds, seqs, offs):
    """``curand_init(seed, seq, off)`` into each row of ``words`` (rows of uint32). An
    MRG32k3a subsequence past cuRAND's valid range is an error (cuRAND leaves a zero
    state there, or reads past its table; tilejit's GPU code masks it to 51 bits)."""
    start = g.xorwow_init if gen == rs.XORWOW else g.mrg_init
    if gen == rs.MRG32K3A:
        top = int(np.max(seqs, initial=0))
        if top >> g.MRG_SUBSEQUENCE_BITS:
            raise ValueError(
                f"T.rng_init(generator=\"curandStateMRG32k3a_t\"): argument `seq`: "
                f"expected 0 … 2^{g.MRG_SUBSEQUENCE_BITS} - 1 (cuRAND's valid range), got "
                f"{top if top < 1 << 63 else top - (1 << 64)}: cuRAND's curand_init leaves "
                f"a zero state there (every draw the same) or reads past its table")
    for row, seed, seq, off in zip(words, seeds, seqs, offs):
        _store(row, gen, start(int(seed), int(seq), int(off)))


def skip(words, gen, n: int):
    """``skipahead(n)`` of each row."""
    jump = g.xorwow_skip if gen == rs.XORWOW else g.mrg_skip
    for row in words:
        a, b = _state(row, gen)
        _store(row, gen, jump(a, b, n))


def next_words(words, gen):
    """``curand``: each row's next word (uint32); the rows move on."""
    if gen == rs.XORWOW:
        v = words[:, S:S + 5].astype(np.uint32)
        t = v[:, 0] ^ (v[:, 0] >> np.uint32(2))
        new = v[:, 4] ^ (v[:, 4] << np.uint32(4)) ^ t ^ (t << np.uint32(1))
        d = words[:, S + 5].astype(np.uint32) + np.uint32(g.XORWOW_WEYL)
        words[:, S:S + 4] = v[:, 1:5]
        words[:, S + 4] = new
        words[:, S + 5] = d
        return (new + d).astype(np.uint32)
    s = words[:, S:S + 6].astype(np.int64)
    p1 = (g.A12 * s[:, 1] - g.A13N * s[:, 0]) % g.M1
    p2 = (g.A21 * s[:, 5] - g.A23N * s[:, 3]) % g.M2
    words[:, S:S + 6] = np.stack([s[:, 1], s[:, 2], p1, s[:, 4], s[:, 5], p2], 1)
    return np.where(p1 > p2, p1 - p2, p1 - p2 + g.M1).astype(np.uint32)


def _stream(row, gen, count):
    """The ``count`` words from the position of ``row`` on."""
    a, b = _state(row, gen)
    out = np.zeros(count, np.uint32)
    for i in range(count):
        if gen == rs.XORWOW:
            a, b, out[i] = g.xorwow_next(a, b)
        else:
            a, b, out[i] = g.mrg_next(a, b)
    return out


def words_at(row, gen, offsets, count):
    """For each offset (an array), the ``count`` words from ``offset`` words past the
    position of ``row``: a list of ``count`` arrays of offsets' shape."""
    offsets = np.asarray(offsets).astype(np.int64)
    if not offsets.size:
        return [np.zeros(offsets.shape, np.uint32) for _ in range(count)]
    first = int(offsets.min())
    if first < 0:
        raise ValueError("a random draw before the stream's position")
    span = int(offsets.max()) - first + count
    if span <= _STEPPED:            # one jump to the first word, then steps
        start = row.copy()
        skip(start[None], gen, first)
        stream = _stream(start, gen, span)
        return [stream[offsets - first + i] for i in range(count)]
    out = [np.zeros(offsets.shape, np.uint32) for _ in range(count)]
    for index, offset in np.ndenumerate(offsets):
        copy = row.copy()
        skip(copy[None], gen, int(offset))
        for i, word in enumerate(_stream(copy, gen, count)):
            out[i][index] = word
    return out

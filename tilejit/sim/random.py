"""The simulator's random streams: cuRAND's Philox4x32-10 on numpy, word for word what
``codegen/lowering/random.py`` computes on the GPU (``language/random.py`` says what the
draws mean, ``ir/random_state.py`` how a thread's stream is held); XORWOW and MRG32k3a
in ``sim/random_sequential.py``, their draws' conversions here.

The state is the kernel's ``__tj_rng`` local array: one row of ``WORDS`` uint32 per
thread in a kernel with per-thread code (a ``LaneTensor``), else one for the block
(every thread's stream the same). ``rng_init`` and ``rng_next`` work on the active
threads' rows; ``rng_at`` (a ``T.Parallel`` iteration's draw) needs the threads' streams
to agree, since which thread runs an iteration is the compiler's layout: where they
differ it is a ``ThreadCodeError`` (not supported in simulation; on the GPU each
iteration reads the stream of the thread that runs it).

The 32-bit words and the uniform floats are cuRAND's exactly. Normals come from the
same words through float64 ``log``, ``sqrt``, ``sin`` and ``cos`` rounded to the draw's
type; the GPU's come from ``T.log``'s, ``T.sin``'s and ``T.cos``'s IR: both within a few
ulp of the exact Box–Muller value of the words. cuRAND's float normal uses
``__sincosf``, the special function unit's approximation (about 2^-21 absolute), so
ours and cuRAND's float normals differ by up to that much.
"""
from __future__ import annotations

import numpy as np

from tilejit.ir import random_generators as generators
from tilejit.ir import random_state as rs
from tilejit.sim import random_sequential as sequential
from tilejit.sim.runtime import STATE, UninitializedReadError, _caller_location

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
TWO_POW_M32 = np.float32(2.0 ** -32)
TWO_POW_M33 = np.float32(2.0 ** -33)
TWO_PI_2POW32 = float(np.float32(2.0 ** -32) * np.float32(6.2831855))


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter (c0 … c3) under the key (k0, k1): four uint32 arrays."""
    c = [np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3)]
    k = [np.asarray(x, dtype=np.uint64) for x in (k0, k1)]
    for r in range(10):
        if r:
            k = [(k[0] + np.uint64(W0)) & LOW, (k[1] + np.uint64(W1)) & LOW]
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> _32) ^ c[1] ^ k[0], p1 & LOW, (p0 >> _32) ^ c[3] ^ k[1], p0 & LOW]
    return [x.astype(np.uint32) for x in c]


def _rows(state):
    """(the state as rows of WORDS words, the rows of the active threads)."""
    data = state.data.reshape(-1, rs.WORDS)
    if data.shape[0] == 1:
        return data, np.zeros(1, dtype=np.int64)
    mask = STATE.mask
    if mask is None or np.ndim(mask) == 0:
        on = np.arange(data.shape[0]) if mask is None or bool(mask) else np.zeros(0, np.int64)
        return data, on
    return data, np.flatnonzero(np.broadcast_to(mask, (data.shape[0],)))


def _per_row(value, rows, n):
    value = np.asarray(value)
    return np.broadcast_to(value, (n,))[rows] if value.ndim else np.full(len(rows), value)


def _u64(value):
    """A value as C converts it to ``unsigned long long`` (two's complement)."""
    return np.asarray(value).astype(np.int64).view(np.uint64)


def rng_init(state, seed, seq, off, gen):
    """``curand_init(seed, seq, off)`` of generator ``gen`` in each active thread's row."""
    data, rows = _rows(state)
    n = data.shape[0]
    seed, seq, off = (_u64(_per_row(v, rows, n)) for v in (seed, seq, off))
    words = np.zeros((len(rows), rs.WORDS), dtype=np.uint32)
    if gen != rs.PHILOX:
        sequential.init(words, gen, seed, seq, off)
        words[:, rs.READY] = 1
        data[rows] = words
        return
    block = off >> np.uint64(2)
    words[:, rs.KEY] = (seed & LOW).astype(np.uint32)
    words[:, rs.KEY + 1] = (seed >> _32).astype(np.uint32)
    words[:, rs.COUNTER] = (block & LOW).astype(np.uint32)
    words[:, rs.COUNTER + 1] = (block >> _32).astype(np.uint32)
    words[:, rs.COUNTER + 2] = (seq & LOW).astype(np.uint32)
    words[:, rs.COUNTER + 3] = (seq >> _32).astype(np.uint32)
    words[:, rs.INDEX] = (off & np.uint64(3)).astype(np.uint32)
    words[:, rs.READY] = 1
    _refill(words)
    data[rows] = words


def _refill(words):
    out = philox(*(words[:, rs.COUNTER + i] for i in range(4)), words[:, rs.KEY],
                 words[:, rs.KEY + 1])
    for i in range(4):
        words[:, rs.OUTPUT + i] = out[i]


def _ready(words, what):
    if len(words) and not np.all(words[:, rs.READY]):
        raise UninitializedReadError(
            f"{what} before T.rng_init: the thread's random stream is not started (on the "
            f"GPU: whatever its registers held){_caller_location(4)}")


def _next(words):
    """``curand``: each row's next word; the rows move on."""
    rows = np.arange(len(words))
    got = words[rows, rs.OUTPUT + words[:, rs.INDEX].astype(np.int64)]
    words[:, rs.INDEX] += 1
    full = words[:, rs.INDEX] == 4
    if np.any(full):
        sub = words[full]
        counter = (sub[:, rs.COUNTER].astype(np.uint64)
                   | sub[:, rs.COUNTER + 1].astype(np.uint64) << _32) + np.uint64(1)
        carry = counter == 0
        sub[:, rs.COUNTER] = (counter & LOW).astype(np.uint32)
        sub[:, rs.COUNTER + 1] = (counter >> _32).astype(np.uint32)
        high = (sub[:, rs.COUNTER + 2].astype(np.uint64)
                | sub[:, rs.COUNTER + 3].astype(np.uint64) << _32) + carry.astype(np.uint64)
        sub[:, rs.COUNTER + 2] = (high & LOW).astype(np.uint32)
        sub[:, rs.COUNTER + 3] = (high >> _32).astype(np.uint32)
        sub[:, rs.INDEX] = 0
        _refill(sub)
        words[full] = sub
    return got


def uniform(x):
    """``curand_uniform``: float32 in (0, 1]."""
    return np.asarray(x, np.uint32).astype(np.float32) * TWO_POW_M32 + TWO_POW_M33


def uniform_double(x):
    """``curand_uniform_double`` of Philox: (x + 1) / 2^32, exactly."""
    return (np.asarray(x, np.uint32).astype(np.float64) + 1.0) * 2.0 ** -32


def box_muller(x, y):
    """``_curand_box_muller``: (sin, cos) float32 pair."""
    u = uniform(x).astype(np.float64)
    v = np.float32(np.asarray(y, np.uint32).astype(np.float32).astype(np.float64)
                   * TWO_PI_2POW32 + TWO_PI_2POW32 / 2).astype(np.float64)
    s = np.sqrt(-2.0 * np.log(u))
    return (np.sin(v) * s).astype(np.float32), (np.cos(v) * s).astype(np.float32)


def _hq(lo, hi):
    return np.asarray(lo, np.uint32).astype(np.uint64) ^ (
        np.asarray(hi, np.uint32).astype(np.uint64) << np.uint64(21))


def uniform_double_hq(lo, hi):
    """``_curand_uniform_double_hq``: 53 bits of two words, in (0, 1)."""
    return _hq(lo, hi).astype(np.float64) * 2.0 ** -53 + 2.0 ** -54


def mrg_uniform_double(x):
    """``curand_uniform_double`` of MRG32k3a: x · MRG32K3A_NORM."""
    return np.asarray(x, np.uint32).astype(np.float64) * generators.NORM


def box_muller_double(x0, x1, y0, y1):
    """``_curand_box_muller_double``: (sin, cos) float64 pair of 4 words."""
    u = uniform_double_hq(x0, x1)
    v = _hq(y0, y1).astype(np.float64) * 2.0 ** -52 + 2.0 ** -53
    s = np.sqrt(-2.0 * np.log(u))
    sin, cos = sincospi(v)
    return sin * s, cos * s


def sincospi(v):
    """(sin πv, cos πv) as the device's ``sincospi`` (and the GPU's lowering,
    ``trig.sincospi_double``) compute them: ``v = q/2 + f`` exactly, |f| ≤ 1/4, then
    sin and cos of ``π·f`` chosen by ``q mod 4`` (``sin(np.pi * v)`` loses the
    reduction's precision near the zeros: thousands of ulps)."""
    q = np.floor(2.0 * v + 0.5)
    f = v - 0.5 * q
    r = np.pi * f
    s, c = np.sin(r), np.cos(r)
    k = np.mod(q, 4).astype(np.int64)
    return np.choose(k, [s, c, -s, -c]), np.choose(k, [c, -s, -c, s])


_DTYPE = {rs.UINT32: np.uint32, rs.UNIFORM: np.float32, rs.UNIFORM_DOUBLE: np.float64,
          rs.NORMAL: np.float32, rs.NORMAL_DOUBLE: np.float64}
_WHAT = {rs.UINT32: "T.rng_rand()", rs.UNIFORM: "T.rng_rand_float()",
         rs.UNIFORM_DOUBLE: "T.rng_rand_float(bit=64)",
         rs.NORMAL: "T.rng_rand_float(dist='normal')",
         rs.NORMAL_DOUBLE: "T.rng_rand_float(bit=64, dist='normal')"}


def mrg_uniform(x):
    """``curand_uniform`` of MRG32k3a: (float)(x · MRG32K3A_NORM), x in 1 … m1."""
    return (np.asarray(x, np.uint32).astype(np.float64) * generators.NORM).astype(np.float32)


def box_muller_mrg(x, y):
    """``curand_box_muller_mrg``: u = curand_uniform, v = curand_uniform · 2π in float,
    (s·sin v, s·cos v) with ``s = sqrt(-2 log u)``."""
    u = mrg_uniform(x).astype(np.float64)
    v = (mrg_uniform(y) * np.float32(6.2831855)).astype(np.float64)
    s = np.sqrt(-2.0 * np.log(u))
    return (np.sin(v) * s).astype(np.float32), (np.cos(v) * s).astype(np.float32)


def box_muller_mrg_double(x, y):
    """``curand_box_muller_mrg_double`` of two steps: sin and cos of 2π·v as ``sincospi``
    of 2v (cuRAND's ``sin(v · 2π)`` rounds the product first: within about 1e-15)."""
    u, v = mrg_uniform_double(x), mrg_uniform_double(y)
    s = np.sqrt(-2.0 * np.log(u))
    sin, cos = sincospi(2.0 * v)
    return sin * s, cos * s


def value(gen, kind, take):
    """A draw of ``kind`` from generator ``gen``'s words, which ``take()`` hands out one
    at a time; a normal's (first, second) pair."""
    if kind == rs.UINT32:
        if gen == rs.MRG32K3A:      # curand(): the word scaled to 32 bits
            return (np.asarray(take(), np.uint32).astype(np.float64)
                    * generators.BITS_NORM).astype(np.uint32)
        return take()
    if kind == rs.UNIFORM:
        return mrg_uniform(take()) if gen == rs.MRG32K3A else uniform(take())
    if kind == rs.UNIFORM_DOUBLE:
        if gen == rs.PHILOX:
            return uniform_double(take())
        if gen == rs.MRG32K3A:
            return mrg_uniform_double(take())
        return uniform_double_hq(take(), take())
    if gen == rs.MRG32K3A:
        pair = box_muller_mrg if kind == rs.NORMAL else box_muller_mrg_double
        return pair(take(), take())
    if kind == rs.NORMAL:
        return box_muller(take(), take())
    return box_muller_double(take(), take(), take(), take())


def _take(words, gen):
    return _next(words) if gen == rs.PHILOX else sequential.next_words(words, gen)


def _draw(words, kind, gen):
    if kind not in (rs.NORMAL, rs.NORMAL_DOUBLE):
        return value(gen, kind, lambda: _take(words, gen))
    flag, extra = (rs.NORMAL_FLAG, rs.NORMAL_EXTRA) if kind == rs.NORMAL else \
        (rs.NORMAL_FLAG_DOUBLE, rs.NORMAL_EXTRA_DOUBLE)
    dtype = _DTYPE[kind]
    out = np.zeros(len(words), dtype=dtype)
    cached = words[:, flag] == 1
    if np.any(cached):
        out[cached] = words[cached, extra:extra + dtype().itemsize // 4].copy().view(
            dtype).reshape(-1)
        words[cached, flag] = 0
    fresh = ~cached
    if np.any(fresh):
        sub = words[fresh]
        first, second = value(gen, kind, lambda: _take(sub, gen))
        sub[:, extra:extra + dtype().itemsize // 4] = np.asarray(
            second, dtype).reshape(-1, 1).view(np.uint32)
        sub[:, flag] = 1
        words[fresh] = sub
        out[fresh] = first
    return out


def rng_next(state, kind, gen):
    """The active threads' next draw of ``kind`` (their streams move on)."""
    data, rows = _rows(state)
    words = data[rows]
    _ready(words, _WHAT[kind])
    got = _draw(words, kind, gen)
    data[rows] = words
    if data.shape[0] == 1:
        return _DTYPE[kind](got[0])
    out = np.zeros(data.shape[0], dtype=_DTYPE[kind])
    out[rows] = got
    return out


def _shared_stream(state, what):
    """The one stream the block's threads hold at a T.Parallel (a row of words)."""
    data = state.data.reshape(-1, rs.WORDS)
    _ready(data, what)
    keyed = data[:, :rs.INDEX + 1]
    if not np.all(keyed == keyed[:1]):
        from tilejit.sim.threads import ThreadCodeError   # threads.py imports runtime
        raise ThreadCodeError(
            f"{what} inside a T.Parallel loop, where the block's threads hold different "
            f"random streams (T.rng_init's seq or off depends on the thread index, as its "
            f"default seq does): an iteration reads the stream of the thread that runs it, "
            f"which is the compiler's layout's choice (not supported in simulation); give "
            f"T.rng_init a seq and off that are the same in every thread (the block's, e.g. "
            f"T.rng_init(seed, bx)), or draw in the thread's own code"
            f"{_caller_location(3)}")
    return data[0]


def _ahead(row, count):
    """(the counter, the word's index in its block) ``count`` words (an array) past the
    stream ``row``'s position: the 128-bit counter moves on, as cuRAND's ``skipahead``."""
    block = np.uint64(row[rs.COUNTER]) | np.uint64(row[rs.COUNTER + 1]) << _32
    seq = np.uint64(row[rs.COUNTER + 2]) | np.uint64(row[rs.COUNTER + 3]) << _32
    total = np.asarray(count).astype(np.int64).astype(np.uint64) + np.uint64(row[rs.INDEX])
    moved = block + (total >> np.uint64(2))
    seq = seq + (moved < block).astype(np.uint64)
    return (moved & LOW, moved >> _32, seq & LOW, seq >> _32), total & np.uint64(3)


def _word_at(row, count):
    counter, lane = _ahead(row, count)
    out = philox(*counter, row[rs.KEY], row[rs.KEY + 1])
    return np.choose(lane.astype(np.int64), out).astype(np.uint32)


def rng_at(state, kind, word, gen):
    """The draw of ``kind`` at ``word`` words past the stream's position (a T.Parallel
    iteration's); the stream does not move."""
    row = _shared_stream(state, _WHAT[kind])
    word = np.asarray(word).astype(np.int64)
    count = rs.words_per_draw(gen, kind)
    words = [_word_at(row, word + i) for i in range(count)] if gen == rs.PHILOX else \
        sequential.words_at(row, gen, word, count)
    got = value(gen, kind, iter(words).__next__)
    if kind in (rs.NORMAL, rs.NORMAL_DOUBLE):
        got = got[0]
    got = np.asarray(got, _DTYPE[kind])
    return _DTYPE[kind](got) if np.ndim(got) == 0 else got


def rng_skip(state, words, gen):
    """Every active thread's stream moves ``words`` words on (after a T.Parallel)."""
    data, rows = _rows(state)
    sub = data[rows]
    _ready(sub, "a T.Parallel's random draws")
    if gen != rs.PHILOX:
        sequential.skip(sub, gen, int(words))
        data[rows] = sub
        return
    for row in sub:
        counter, lane = _ahead(row, int(words))
        row[rs.COUNTER:rs.COUNTER + 4] = [np.uint32(c) for c in counter]
        row[rs.INDEX] = np.uint32(lane)
    _refill(sub)
    data[rows] = sub

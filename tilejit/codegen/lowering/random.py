"""Random streams on the GPU (``frontend/random_draws.py`` inserts the markers,
``ir/random_state.py`` lays out the state, ``sim/random.py`` is the same on numpy).
XORWOW and MRG32k3a step and jump in ``lowering/random_sequential.py``; their words
become draws here, as cuRAND converts them (``_value``).

cuRAND's Philox4x32-10 as plain LLVM IR: a round is two 32×32→64-bit products (PTX
``mul.hi.u32`` and ``mul.lo``) and four xors, ten rounds with the key bumped by the
Weyl constants in between. The state is the kernel's local array of uint32 words, kept
in registers (its indices are constants). ``__tj_rng_next`` is ``curand``: the word the
index points at, and past the fourth the counter steps on and the next four words are
computed (a branch taken once in four draws). ``__tj_rng_at`` (a ``T.Parallel``
iteration's draw) computes the block of the word it reads from the position alone,
leaving the state as it is. The uniform floats are cuRAND's bit for bit
(``float(x)·2^-32 + 2^-33``, ``(x + 1)·2^-32``); the normals use this compiler's
``log``, ``sqrt``, ``sin`` and ``cos``, within a few ulp of the exact Box–Muller value
of the words (cuRAND's float normal uses ``__sincosf``, the special function unit's
approximation, about 2^-21 absolute: up to that far from ours).
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types

from tilejit.ir import markers
from tilejit.ir import random_state as rs
from tilejit.codegen.lowering import math as lm
from tilejit.codegen.lowering import random_sequential as sequential
from tilejit.ir import random_generators as generators
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.trig import cos, sin, sincospi_double
from tilejit.codegen.lowering.tiles import intrinsic
from tilejit.codegen.typing.tiles import TileType
from tilejit.ir.kernel_config import current_kernel_or_none

I32, I64 = ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85


def _word(builder, state, i):
    return builder.gep(state, [I32(i)], inbounds=True)


def _load(builder, state, i):
    return builder.load(_word(builder, state, i))


def _store(builder, state, i, value):
    builder.store(value, _word(builder, state, i))


def _mul_wide(builder, m, x):
    """(high, low) words of the 64-bit product ``m · x``. On NVIDIA ``mul.hi.u32`` and
    ``mul.lo.u32`` (NVPTX selects a 64-bit multiply, several instructions, for the
    widened product by a constant above 2^31); elsewhere (AMDGPU, the host's tests) the
    product widened to 64 bits."""
    config = current_kernel_or_none()
    if config is not None and config.target.kind == "cuda":
        hi = builder.call(intrinsic(builder, "llvm.nvvm.mulhi.ui", I32, [I32, I32]),
                          [x, I32(m)])
        return hi, builder.mul(x, I32(m))
    p = builder.mul(I64(m), builder.zext(x, I64), flags=["nuw"])
    return builder.trunc(builder.lshr(p, I64(32)), I32), builder.trunc(p, I32)


def philox(builder, c, k):
    """Philox4x32-10 of the counter ``c`` (four i32) under the key ``k`` (two i32)."""
    c, k = list(c), list(k)
    for r in range(10):
        if r:
            k = [builder.add(k[0], I32(W0)), builder.add(k[1], I32(W1))]
        hi0, lo0 = _mul_wide(builder, M0, c[0])
        hi1, lo1 = _mul_wide(builder, M1, c[2])
        c = [builder.xor(builder.xor(hi1, c[1]), k[0]), lo1,
             builder.xor(builder.xor(hi0, c[3]), k[1]), lo0]
    return c


def _refill(builder, state):
    counter = [_load(builder, state, rs.COUNTER + i) for i in range(4)]
    key = [_load(builder, state, rs.KEY + i) for i in range(2)]
    for i, word in enumerate(philox(builder, counter, key)):
        _store(builder, state, rs.OUTPUT + i, word)


def _halves(builder, value):
    return builder.trunc(value, I32), builder.trunc(builder.lshr(value, I64(32)), I32)


def _joined(builder, lo, hi):
    return builder.or_(builder.zext(lo, I64), builder.shl(builder.zext(hi, I64), I64(32)))


def _pick(builder, words, lane):
    """words[lane] for an i32 lane in 0…3, as selects (the words stay in registers)."""
    out = words[3]
    for i in (2, 1, 0):
        out = builder.select(builder.icmp_unsigned("==", lane, I32(i)), words[i], out)
    return out


def _generator(sig) -> int:
    return sig.args[-1].literal_value


@lower(markers.stub(markers.RNG_INIT), TileType, types.int64, types.int64, types.int64,
       types.IntegerLiteral)
def rng_init_impl(context, builder, sig, args):
    state, seed, seq, off = args[:4]
    gen = _generator(sig)
    for i in (rs.NORMAL_FLAG, rs.NORMAL_EXTRA, rs.NORMAL_FLAG_DOUBLE,
              rs.NORMAL_EXTRA_DOUBLE, rs.NORMAL_EXTRA_DOUBLE + 1):
        _store(builder, state, i, I32(0))
    _store(builder, state, rs.READY, I32(1))
    if gen != rs.PHILOX:
        sequential.invalidate(builder)
        sequential.init(builder, state, seed, seq, off, gen)
        return context.get_dummy_value()
    block = builder.lshr(off, I64(2))
    for i, word in enumerate(_halves(builder, seed) + _halves(builder, block)
                             + _halves(builder, seq)):
        _store(builder, state, rs.KEY + i, word)
    _store(builder, state, rs.INDEX, builder.trunc(builder.and_(off, I64(3)), I32))
    _refill(builder, state)
    return context.get_dummy_value()


def _next(builder, state):
    """``curand``: the word the index points at; past the fourth, the next block."""
    index = _load(builder, state, rs.INDEX)
    word = _pick(builder, [_load(builder, state, rs.OUTPUT + i) for i in range(4)], index)
    index = builder.add(index, I32(1))
    _store(builder, state, rs.INDEX, index)
    with builder.if_then(builder.icmp_unsigned("==", index, I32(4)), likely=False):
        low = builder.add(_joined(builder, _load(builder, state, rs.COUNTER),
                                  _load(builder, state, rs.COUNTER + 1)), I64(1))
        high = builder.add(_joined(builder, _load(builder, state, rs.COUNTER + 2),
                                   _load(builder, state, rs.COUNTER + 3)),
                           builder.zext(builder.icmp_unsigned("==", low, I64(0)), I64))
        for i, w in enumerate(_halves(builder, low) + _halves(builder, high)):
            _store(builder, state, rs.COUNTER + i, w)
        _store(builder, state, rs.INDEX, I32(0))
        _refill(builder, state)
    return word


def uniform(builder, x):
    """``curand_uniform``: float(x)·2^-32 + 2^-33 (the product exact)."""
    return builder.fadd(builder.fmul(builder.uitofp(x, F32), F32(2.0 ** -32)),
                        F32(2.0 ** -33))


def uniform_double(builder, x):
    """``curand_uniform_double`` of Philox: (x + 1)·2^-32, exact."""
    return builder.fmul(builder.fadd(builder.uitofp(x, F64), F64(1.0)), F64(2.0 ** -32))


_TWO_PI_2POW32 = 6.2831854820251465 * 2.0 ** -32     # 2^-32 · 6.2831855f, exact in float


def box_muller(builder, x, y):
    """``_curand_box_muller``: (s·sin v, s·cos v), ``s = sqrt(-2 log u)``."""
    e = lm._E(builder, F32)
    u = uniform(builder, x)
    v = e.fma(builder.uitofp(y, F32), _TWO_PI_2POW32, _TWO_PI_2POW32 / 2)
    s = e.sqrt(e.mul(lm.log(builder, u), -2.0))
    return e.mul(sin(builder, v), s), e.mul(cos(builder, v), s)


def _hq(builder, lo, hi):
    """The 53-bit integer of two words, as a double (``lo ^ hi << 21``)."""
    return builder.uitofp(builder.xor(builder.zext(lo, I64),
                                      builder.shl(builder.zext(hi, I64), I64(21))), F64)


def box_muller_double(builder, x0, x1, y0, y1):
    """``_curand_box_muller_double``: 53-bit u and v from two words each."""
    d = lm._E(builder, F64)
    u = d.fma(_hq(builder, x0, x1), 2.0 ** -53, 2.0 ** -54)
    v = d.fma(_hq(builder, y0, y1), 2.0 ** -52, 2.0 ** -53)
    s = d.sqrt(d.mul(lm.log(builder, u), -2.0))
    sn, cs = sincospi_double(builder, v)
    return d.mul(sn, s), d.mul(cs, s)


def mrg_uniform(builder, x):
    """``curand_uniform`` of MRG32k3a: (float)(x · MRG32K3A_NORM)."""
    return builder.fptrunc(builder.fmul(builder.uitofp(x, F64), F64(generators.NORM)), F32)


def mrg_uniform_double(builder, x):
    return builder.fmul(builder.uitofp(x, F64), F64(generators.NORM))


def box_muller_mrg(builder, x, y):
    """``curand_box_muller_mrg``: v = curand_uniform · 2π in float."""
    e = lm._E(builder, F32)
    u = mrg_uniform(builder, x)
    v = e.mul(mrg_uniform(builder, y), 6.2831855)
    s = e.sqrt(e.mul(lm.log(builder, u), -2.0))
    return e.mul(sin(builder, v), s), e.mul(cos(builder, v), s)


def box_muller_mrg_double(builder, x, y):
    """``curand_box_muller_mrg_double``: sin and cos of 2π·v as sincospi of 2v (cuRAND
    rounds v · 2π first: within about 1e-15)."""
    d = lm._E(builder, F64)
    u, v = mrg_uniform_double(builder, x), mrg_uniform_double(builder, y)
    s = d.sqrt(d.mul(lm.log(builder, u), -2.0))
    sn, cs = sincospi_double(builder, d.mul(v, 2.0))
    return d.mul(sn, s), d.mul(cs, s)


def _hq_double(builder, x, y):
    """``_curand_uniform_double_hq``: 53 bits of two words."""
    return lm._E(builder, F64).fma(_hq(builder, x, y), 2.0 ** -53, 2.0 ** -54)


def _value(builder, gen, kind, words):
    """A draw of ``kind`` from generator ``gen``'s words, which ``words()`` hands out one
    at a time; a normal's (first, second) pair."""
    if kind == rs.UINT32:
        if gen == rs.MRG32K3A:      # curand(): the word scaled to 32 bits
            return builder.fptoui(builder.fmul(builder.uitofp(words(), F64),
                                               F64(generators.BITS_NORM)), I32)
        return words()
    if kind == rs.UNIFORM:
        return (mrg_uniform if gen == rs.MRG32K3A else uniform)(builder, words())
    if kind == rs.UNIFORM_DOUBLE:
        if gen == rs.XORWOW:
            return _hq_double(builder, words(), words())
        return (mrg_uniform_double if gen == rs.MRG32K3A else uniform_double)(builder,
                                                                             words())
    if gen == rs.MRG32K3A:
        pair = box_muller_mrg if kind == rs.NORMAL else box_muller_mrg_double
        return pair(builder, words(), words())
    if kind == rs.NORMAL:
        return box_muller(builder, words(), words())
    return box_muller_double(builder, *(words() for _ in range(4)))


def _normal(builder, state, pair, flag, extra, ty):
    """``curand_normal``: the cached second value of the last pair, else a new pair's
    first (its second cached)."""
    result = cgutils.alloca_once(builder, ty)
    cached = builder.icmp_unsigned("==", _load(builder, state, flag), I32(1))
    n = 1 if ty == F32 else 2          # words of the cached value
    with builder.if_else(cached) as (then, otherwise):
        with then:
            bits = [_load(builder, state, extra + i) for i in range(n)]
            value = bits[0] if n == 1 else _joined(builder, *bits)
            builder.store(builder.bitcast(value, ty), result)
            _store(builder, state, flag, I32(0))
        with otherwise:
            first, second = pair()
            raw = builder.bitcast(second, ir.IntType(32 * n))
            for i, w in enumerate([raw] if n == 1 else _halves(builder, raw)):
                _store(builder, state, extra + i, w)
            _store(builder, state, flag, I32(1))
            builder.store(first, result)
    return builder.load(result)


def _first(value):
    return value[0] if isinstance(value, tuple) else value


def _words_of(builder, state, gen):
    if gen == rs.PHILOX:
        return lambda: _next(builder, state)
    return lambda: sequential.next_word(builder, state, gen)


@lower(markers.stub(markers.RNG_NEXT), TileType, types.IntegerLiteral, types.IntegerLiteral)
def rng_next_impl(context, builder, sig, args):
    state = args[0]
    kind, gen = sig.args[1].literal_value, _generator(sig)
    if gen != rs.PHILOX:
        sequential.invalidate(builder)
    words = _words_of(builder, state, gen)
    if kind == rs.NORMAL:
        return _normal(builder, state, lambda: _value(builder, gen, kind, words),
                       rs.NORMAL_FLAG, rs.NORMAL_EXTRA, F32)
    if kind == rs.NORMAL_DOUBLE:
        return _normal(builder, state, lambda: _value(builder, gen, kind, words),
                       rs.NORMAL_FLAG_DOUBLE, rs.NORMAL_EXTRA_DOUBLE, F64)
    return _value(builder, gen, kind, words)


def _ahead(builder, state, count):
    """The counter and word index ``count`` words past the state's position: the
    128-bit counter (its low half the block, its high half the subsequence, as
    cuRAND's ``skipahead``) and the index of the word in its block."""
    block = _joined(builder, _load(builder, state, rs.COUNTER),
                    _load(builder, state, rs.COUNTER + 1))
    seq = _joined(builder, _load(builder, state, rs.COUNTER + 2),
                  _load(builder, state, rs.COUNTER + 3))
    total = builder.add(builder.zext(_load(builder, state, rs.INDEX), I64), count)
    moved = builder.add(block, builder.lshr(total, I64(2)))
    seq = builder.add(seq, builder.zext(builder.icmp_unsigned("<", moved, block), I64))
    lane = builder.trunc(builder.and_(total, I64(3)), I32)
    return list(_halves(builder, moved)) + list(_halves(builder, seq)), lane


@lower(markers.stub(markers.RNG_AT), TileType, types.IntegerLiteral, types.int64,
       types.IntegerLiteral)
def rng_at_impl(context, builder, sig, args):
    state, _, word = args[:3]
    kind, gen = sig.args[1].literal_value, _generator(sig)
    if gen != rs.PHILOX:            # the cursor, moved to `word` past the stream's position
        cursor = sequential.at(builder, state, word, gen)
        value = _first(_value(builder, gen, kind, _words_of(builder, cursor, gen)))
        sequential.moved(builder, word, rs.words_per_draw(gen, kind))
        return value
    key = [_load(builder, state, rs.KEY + i) for i in range(2)]
    taken = [0]

    def words():
        counter, lane = _ahead(builder, state, builder.add(word, I64(taken[0])))
        taken[0] += 1
        return _pick(builder, philox(builder, counter, key), lane)
    return _first(_value(builder, gen, kind, words))


@lower(markers.stub(markers.RNG_SKIP), TileType, types.int64, types.IntegerLiteral)
def rng_skip_impl(context, builder, sig, args):
    state, count = args[:2]
    gen = _generator(sig)
    if gen != rs.PHILOX:
        sequential.invalidate(builder)
        sequential.skip(builder, state, count, gen)
        return context.get_dummy_value()
    counter, lane = _ahead(builder, state, count)
    for i, w in enumerate(counter):
        _store(builder, state, rs.COUNTER + i, w)
    _store(builder, state, rs.INDEX, lane)
    _refill(builder, state)
    return context.get_dummy_value()

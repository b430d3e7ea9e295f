"""cuRAND's XORWOW and MRG32k3a on the GPU, as plain LLVM IR (``ir/random_generators.py``
has the numbers and the simulator's twin; ``lowering/random.py`` registers the markers
and converts words to draws).

The six state words sit in the thread's local array (``ir/random_state.SEQUENTIAL``). A
step is a few shifts and xors (XORWOW) or two 64-bit products reduced modulo m1 and m2
(MRG32k3a). A jump by a run-time count walks its 64 bits (a loop): for each set bit k,
XORWOW applies ``z^(2^k) mod P`` to its words by Horner's rule (160 steps of the linear
part, a loop), MRG32k3a multiplies its two vectors by the table's 3×3 matrices. The
tables are internal constant arrays of the module (offsets: 64 entries; subsequences:
64 for XORWOW, 51 for MRG32k3a, whose subsequence tilejit masks to cuRAND's valid 51 bits).
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

from tilejit.ir import random_generators as g
from tilejit.ir import random_state as rs

I32, I64 = ir.IntType(32), ir.IntType(64)
S = rs.SEQUENTIAL


def _word(builder, state, i):
    return builder.gep(state, [I32(S + i)], inbounds=True)


def _load(builder, state, n):
    return [builder.load(_word(builder, state, i)) for i in range(n)]


def _store(builder, state, words):
    for i, w in enumerate(words):
        builder.store(w, _word(builder, state, i))


def _table(builder, name, words):
    module = builder.module
    table = module.globals.get(name)
    if table is None:
        ty = ir.ArrayType(I32, len(words))
        table = ir.GlobalVariable(module, ty, name)
        table.global_constant = True
        table.linkage = "internal"
        table.initializer = ir.Constant(ty, [I32(w) for w in words])
    return table


def _entry(builder, table, index):
    return builder.load(builder.gep(table, [I32(0), index], inbounds=True))


# -- XORWOW -----------------------------------------------------------------------------

def _xorwow_linear(builder, v):
    t = builder.xor(v[0], builder.lshr(v[0], I32(2)))
    new = builder.xor(builder.xor(v[4], builder.shl(v[4], I32(4))),
                      builder.xor(t, builder.shl(t, I32(1))))
    return [v[1], v[2], v[3], v[4], new]


def _xorwow_next(builder, state):
    words = _load(builder, state, 6)
    v = _xorwow_linear(builder, words[:5])
    d = builder.add(words[5], I32(g.XORWOW_WEYL))
    _store(builder, state, v + [d])
    return builder.add(v[4], d)


def _xorwow_tables(builder):
    offsets, subsequences = g.xorwow_tables()

    def flat(polys):
        return [(p >> (32 * w)) & g.MASK for p in polys for w in range(5)]
    return (_table(builder, "__tj_xorwow_offsets", flat(offsets)),
            _table(builder, "__tj_xorwow_subsequences", flat(subsequences)))


def _xorwow_apply(builder, state, table, k):
    """v ← r(M) v for r the table's polynomial k: Horner's rule, coefficient 159 first."""
    v = _load(builder, state, 5)
    acc = [cgutils.alloca_once_value(builder, I32(0)) for _ in range(5)]
    with cgutils.for_range(builder, I32(g.XORWOW_DEGREE)) as loop:
        i = builder.sub(I32(g.XORWOW_DEGREE - 1), loop.index)
        word = _entry(builder, table, builder.add(builder.mul(k, I32(5)),
                                                  builder.lshr(i, I32(5))))
        bit = builder.and_(builder.lshr(word, builder.and_(i, I32(31))), I32(1))
        mask = builder.sub(I32(0), bit)
        stepped = _xorwow_linear(builder, [builder.load(a) for a in acc])
        for a, s, x in zip(acc, stepped, v):
            builder.store(builder.xor(s, builder.and_(x, mask)), a)
    _store(builder, state, [builder.load(a) for a in acc])


def _xorwow_skip(builder, state, n, sequence):
    table = _xorwow_tables(builder)[1 if sequence else 0]
    with cgutils.for_range(builder, I32(64)) as loop:
        k = loop.index
        bit = builder.trunc(builder.lshr(n, builder.zext(k, I64)), ir.IntType(1))
        with builder.if_then(bit):
            _xorwow_apply(builder, state, table, k)
    if not sequence:
        d = _word(builder, state, 5)
        builder.store(builder.add(builder.load(d), builder.mul(builder.trunc(n, I32),
                                                               I32(g.XORWOW_WEYL))), d)


def _xorwow_start(builder, state, seed):
    lo, hi = builder.trunc(seed, I32), builder.trunc(builder.lshr(seed, I64(32)), I32)
    t0 = builder.mul(builder.xor(lo, I32(0xAAD26B49)), I32(1099087573))
    t1 = builder.mul(builder.xor(hi, I32(0xF7DCEFDD)), I32(2591861531))
    _store(builder, state, [builder.add(t0, I32(123456789)), builder.xor(t0, I32(362436069)),
                            builder.add(t1, I32(521288629)), builder.xor(t1, I32(88675123)),
                            builder.add(t0, I32(5783321)),
                            builder.add(builder.add(t1, t0), I32(6615241))])


# -- MRG32k3a ---------------------------------------------------------------------------

def _mrg_next(builder, state):
    s = [builder.zext(w, I64) for w in _load(builder, state, 6)]

    def recurrence(a, x, b, y, m):        # (a·x − b·y) mod m, in 0 … m − 1
        p = builder.srem(builder.sub(builder.mul(I64(a), x), builder.mul(I64(b), y)), I64(m))
        return builder.select(builder.icmp_signed("<", p, I64(0)), builder.add(p, I64(m)), p)
    p1 = recurrence(g.A12, s[1], g.A13N, s[0], g.M1)
    p2 = recurrence(g.A21, s[5], g.A23N, s[3], g.M2)
    _store(builder, state, [builder.trunc(x, I32) for x in (s[1], s[2], p1, s[4], s[5], p2)])
    diff = builder.sub(p1, p2)
    word = builder.select(builder.icmp_signed(">", p1, p2), diff, builder.add(diff, I64(g.M1)))
    return builder.trunc(word, I32)


def _mrg_tables(builder):
    tables = g.mrg_tables()

    def flat(what):
        return [x for k in range(64) for which in (1, 2)
                for row in tables[which, what][k] for x in row]
    return (_table(builder, "__tj_mrg_offsets", flat("offset")),
            _table(builder, "__tj_mrg_subsequences", flat("subsequence")))


def _mrg_apply(builder, state, table, k):
    """(s1, s2) ← (A1 s1 mod m1, A2 s2 mod m2) for the table's matrices k."""
    s = [builder.zext(w, I64) for w in _load(builder, state, 6)]
    out = []
    for half, m in ((0, g.M1), (1, g.M2)):
        base = builder.add(builder.mul(k, I32(18)), I32(9 * half))
        vec = s[3 * half:3 * half + 3]
        for i in range(3):
            total = I64(0)
            for j in range(3):
                a = builder.zext(_entry(builder, table, builder.add(base, I32(3 * i + j))), I64)
                total = builder.add(total, builder.urem(builder.mul(a, vec[j]), I64(m)))
            out.append(builder.trunc(builder.urem(total, I64(m)), I32))
    _store(builder, state, out)


def _mrg_skip(builder, state, n, sequence):
    table = _mrg_tables(builder)[1 if sequence else 0]
    if sequence:
        n = builder.and_(n, I64((1 << g.MRG_SUBSEQUENCE_BITS) - 1))
    with cgutils.for_range(builder, I32(64)) as loop:
        k = loop.index
        bit = builder.trunc(builder.lshr(n, builder.zext(k, I64)), ir.IntType(1))
        with builder.if_then(bit):
            _mrg_apply(builder, state, table, k)


def _mrg_start(builder, state, seed):
    lo, hi = builder.trunc(seed, I32), builder.trunc(builder.lshr(seed, I64(32)), I32)
    x1 = builder.zext(builder.xor(lo, I32(0x55555555)), I64)
    x2 = builder.zext(builder.xor(hi, I32(0xAAAAAAAA)), I64)

    def scaled(x, m):
        return builder.trunc(builder.urem(builder.mul(x, I64(12345)), I64(m)), I32)
    seeded = [scaled(x1, g.M1), scaled(x2, g.M1), scaled(x1, g.M1),
              scaled(x2, g.M2), scaled(x1, g.M2), scaled(x2, g.M2)]
    zero = builder.icmp_unsigned("==", seed, I64(0))
    _store(builder, state, [builder.select(zero, I32(12345), w) for w in seeded])


# -- the generator's entry points -------------------------------------------------------

def next_word(builder, state, gen):
    """``curand``: the stream's next word; the state moves on."""
    return _xorwow_next(builder, state) if gen == rs.XORWOW else _mrg_next(builder, state)


def skip(builder, state, n, gen, sequence=False):
    """``skipahead(n)`` (``sequence``: ``skipahead_sequence``/``_subsequence``)."""
    (_xorwow_skip if gen == rs.XORWOW else _mrg_skip)(builder, state, n, sequence)


def init(builder, state, seed, seq, off, gen):
    """``curand_init(seed, seq, off)``."""
    (_xorwow_start if gen == rs.XORWOW else _mrg_start)(builder, state, seed)
    skip(builder, state, seq, gen, sequence=True)
    skip(builder, state, off, gen)


# below these many words a jump steps instead of walking the table (a step: a few xors,
# or two products reduced; a set bit of the table: 160 Horner steps, or 18 products)
_STEPPED = {rs.XORWOW: 256, rs.MRG32K3A: 16}


def _cursor(builder):
    """The kernel's cursor for T.Parallel draws: a copy of the stream's words at a
    position past the thread's own, the position, and whether it is valid; allocated
    (and marked invalid) in the function's entry block, once a function."""
    fn = builder.function
    cursor = getattr(fn, "_tj_rng_cursor", None)
    if cursor is None:
        array = cgutils.alloca_once(builder, ir.ArrayType(I32, rs.WORDS))
        position = cgutils.alloca_once(builder, I64)
        valid = cgutils.alloca_once(builder, ir.IntType(1))
        with builder.goto_entry_block():        # used from any block: made where all are
            words = builder.bitcast(array, I32.as_pointer())
            builder.store(ir.IntType(1)(0), valid)
        cursor = fn._tj_rng_cursor = (words, position, valid)
    return cursor


def invalidate(builder):
    """The thread's stream moved (``T.rng_init``, a draw of its own, a skip): a cursor
    derived from it is stale."""
    if getattr(builder.function, "_tj_rng_cursor", None) is not None:
        builder.store(ir.IntType(1)(0), builder.function._tj_rng_cursor[2])


def _advance(builder, state, n, gen):
    """``n`` words on: stepped where few, else jumped by the tables."""
    few = builder.icmp_unsigned("<", n, I64(_STEPPED[gen]))
    with builder.if_else(few) as (stepping, jumping):
        with stepping:
            with cgutils.for_range(builder, n):
                next_word(builder, state, gen)
        with jumping:
            skip(builder, state, n, gen)


def at(builder, state, word, gen):
    """The cursor moved to ``word`` words past the stream's position, for a T.Parallel
    iteration's draws (read from it with ``next_word``; ``moved`` after them). A thread
    meets its iterations in order, so the cursor usually steps a little or not at all
    where a jump from the stream's position would walk the table."""
    words, position, valid = _cursor(builder)
    ahead = builder.and_(builder.load(valid),
                         builder.icmp_unsigned(">=", word, builder.load(position)))
    with builder.if_else(ahead) as (onward, restart):
        with onward:
            onward_block = builder.block
            delta_onward = builder.sub(word, builder.load(position))
        with restart:
            _store(builder, words, _load(builder, state, rs.SEQUENTIAL_WORDS))
            restart_block = builder.block
    delta = builder.phi(I64)
    delta.add_incoming(delta_onward, onward_block)
    delta.add_incoming(word, restart_block)
    _advance(builder, words, delta, gen)
    return words


def moved(builder, word, taken: int):
    """The cursor stands ``taken`` words past ``word`` (the draws read them)."""
    words, position, valid = _cursor(builder)
    builder.store(builder.add(word, I64(taken)), position)
    builder.store(ir.IntType(1)(1), valid)

"""cuRAND's XORWOW and MRG32k3a generators as numbers: a step, ``curand_init``'s starting
state and the jumps ahead, in plain Python integers. The simulator (``sim/random.py``)
runs these; the GPU's lowering (``codegen/lowering/random.py``) computes the same in IR
and reads its jump tables from here.

XORWOW (Marsaglia's xorshift of five words plus a Weyl sequence ``d``): a step is linear
over GF(2) in ``v[0..4]`` (a 160×160 bit matrix M), and ``d`` grows by 362437. A jump
of n steps is ``M^n v``: with P the minimal polynomial of M (degree 160, found by
Berlekamp–Massey on the bits of a stream), ``M^n = r(M)`` for ``r = z^n mod P``, and
``r(M) v`` is Horner's rule, 160 steps each a step of the linear part and a
conditional xor. A jump by a run-time n applies, for each set bit k, the table's
``z^(2^k) mod P`` (160 bits, five words): cuRAND's ``skipahead`` (offsets) and
``skipahead_sequence`` (subsequences of 2^67 steps) reach the same state through its
precomputed matrices.

MRG32k3a (L'Ecuyer's combined multiple recursive generator): two recurrences of order
three, modulo m1 = 2^32 − 209 and m2 = 2^32 − 22853, each a 3×3 matrix A1, A2 on its
state; a jump of n steps multiplies by ``A^n mod m``, the product of the table's
``A^(2^k)`` over n's set bits (offsets), or of ``A^(2^(76+k))`` (subsequences of 2^76
steps; the subsequence masked to 51 bits: cuRAND's valid range, see
``MRG_SUBSEQUENCE_BITS``). Its word is ``p1 − p2`` if ``p1 > p2``
else ``p1 − p2 + m1`` (in 1 … m1, never 0), as L'Ecuyer's reference; cuRAND's
``curand`` returns it scaled to 32 bits (``(unsigned)(word · BITS_NORM)``), its uniforms
``word · NORM`` (CUDA 11.6's ``curand_kernel.h`` and ``curand_uniform.h``).
"""
from __future__ import annotations

import functools

MASK = 0xFFFFFFFF

# -- XORWOW ----------------------------------------------------------------------------
XORWOW_WEYL = 362437
XORWOW_DEGREE = 160
XORWOW_SEQUENCE_LOG2 = 67          # a subsequence is 2^67 steps


def xorwow_linear(v):
    """The step of the five xorshift words (linear over GF(2)), without ``d``."""
    t = v[0] ^ (v[0] >> 2)
    return [v[1], v[2], v[3], v[4], (v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & MASK]


def xorwow_next(v, d):
    """``curand`` of XORWOW: (v, d, the word)."""
    v = xorwow_linear(v)
    d = (d + XORWOW_WEYL) & MASK
    return v, d, (v[4] + d) & MASK


def xorwow_start(seed: int):
    """``curand_init``'s state before its jumps: the seed's halves salted and mixed."""
    seed &= (1 << 64) - 1
    t0 = (1099087573 * ((seed & MASK) ^ 0xAAD26B49)) & MASK
    t1 = (2591861531 * ((seed >> 32) ^ 0xF7DCEFDD)) & MASK
    v = [(123456789 + t0) & MASK, 362436069 ^ t0, (521288629 + t1) & MASK,
         88675123 ^ t1, (5783321 + t0) & MASK]
    return v, (6615241 + t1 + t0) & MASK


def _berlekamp_massey(bits):
    """The connection polynomial (bit i: the coefficient of z^i) of a GF(2) sequence."""
    c, b, length, m = 1, 1, 0, 1
    for n, bit in enumerate(bits):
        d = bit
        for i in range(1, length + 1):
            d ^= ((c >> i) & 1) & bits[n - i]
        if d == 0:
            m += 1
        elif 2 * length <= n:
            c, b, length, m = c ^ (b << m), c, n + 1 - length, 1
        else:
            c ^= b << m
            m += 1
    return c, length


def _mulmod(a: int, b: int, poly: int, degree: int) -> int:
    """a·b mod poly over GF(2)."""
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if (a >> degree) & 1:
            a ^= poly
    return out


@functools.cache
def xorwow_polynomial() -> int:
    """The minimal polynomial of XORWOW's linear step (bit i: the coefficient of z^i)."""
    v = xorwow_start(1)[0]
    bits = []
    for _ in range(4 * XORWOW_DEGREE):
        bits.append(v[0] & 1)
        v = xorwow_linear(v)
    connection, length = _berlekamp_massey(bits)
    assert length == XORWOW_DEGREE, length
    # the connection polynomial's reverse: s_n = sum c_i s_(n-i) <=> z^L = sum c_i z^(L-i)
    return sum(((connection >> i) & 1) << (length - i) for i in range(length + 1))


@functools.cache
def xorwow_tables():
    """(offsets, subsequences): ``z^(2^k) mod P`` and ``z^(2^(67+k)) mod P``, k < 64, as
    160-bit integers."""
    poly = xorwow_polynomial()
    powers, x = [], 2
    for _ in range(XORWOW_SEQUENCE_LOG2 + 64):
        powers.append(x)
        x = _mulmod(x, x, poly, XORWOW_DEGREE)
    return tuple(powers[:64]), tuple(powers[XORWOW_SEQUENCE_LOG2:])


def xorwow_apply(r: int, v):
    """``r(M) v``: Horner's rule over r's 160 coefficients, highest first."""
    acc = [0] * 5
    for i in range(XORWOW_DEGREE - 1, -1, -1):
        acc = xorwow_linear(acc)
        if (r >> i) & 1:
            acc = [a ^ b for a, b in zip(acc, v)]
    return acc


def xorwow_skip(v, d, n: int, sequence=False):
    """``skipahead(n)`` (or ``skipahead_sequence(n)``: n subsequences of 2^67 steps)."""
    n &= (1 << 64) - 1
    offsets, subsequences = xorwow_tables()
    table = subsequences if sequence else offsets
    for k in range(64):
        if (n >> k) & 1:
            v = xorwow_apply(table[k], v)
    if not sequence:       # 2^67 steps of the Weyl sequence: a multiple of 2^32
        d = (d + XORWOW_WEYL * n) & MASK
    return v, d


def xorwow_init(seed: int, seq: int, off: int):
    v, d = xorwow_start(seed)
    v, d = xorwow_skip(v, d, seq, sequence=True)
    return xorwow_skip(v, d, off)


# -- MRG32k3a ---------------------------------------------------------------------------
M1, M2 = 4294967087, 4294944443
A12, A13N, A21, A23N = 1403580, 810728, 527612, 1370589
# cuRAND's MRG32K3A_NORM (1/m1; cuRAND's headers before CUDA 11 had 1/(m1 + 1)): a
# uniform is the word times it, in double; its curand() scales the word by BITS_NORM
NORM = 2.3283065498378288e-10
BITS_NORM = 1.000000048662
MRG_SUBSEQUENCE_LOG2 = 76
# cuRAND documents subsequences 0 … 2^51 − 1 as valid ("masked to 51 bits"), but its
# code does not mask: the table's rows 51 … 55 are zeros (a subsequence with one of
# those bits set leaves a zero state, whose every word is m1: checked against cuRAND on
# an H100, 2026-12-07) and higher bits read past the table. tilejit's GPU code masks to
# 51 bits; the simulator refuses a larger subsequence (``sim/random_sequential.init``).
MRG_SUBSEQUENCE_BITS = 51
MRG_A1 = ((0, 1, 0), (0, 0, 1), (M1 - A13N, A12, 0))
MRG_A2 = ((0, 1, 0), (0, 0, 1), (M2 - A23N, 0, A21))


def mrg_next(s1, s2):
    """``curand`` of MRG32k3a: (s1, s2, the word in 1 … m1)."""
    p1 = (A12 * s1[1] - A13N * s1[0]) % M1
    p2 = (A21 * s2[2] - A23N * s2[0]) % M2
    word = p1 - p2 if p1 > p2 else p1 - p2 + M1
    return [s1[1], s1[2], p1], [s2[1], s2[2], p2], word


def mrg_start(seed: int):
    seed &= (1 << 64) - 1
    s1, s2 = [12345] * 3, [12345] * 3
    if seed:
        x1 = (seed & MASK) ^ 0x55555555
        x2 = ((seed >> 32) ^ 0xAAAAAAAA) & MASK
        s1 = [x1 * 12345 % M1, x2 * 12345 % M1, x1 * 12345 % M1]
        s2 = [x2 * 12345 % M2, x1 * 12345 % M2, x2 * 12345 % M2]
    return s1, s2


def _matmul(a, b, m):
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3))
                 for i in range(3))


def mrg_matvec(a, s, m):
    return [sum(a[i][k] * s[k] for k in range(3)) % m for i in range(3)]


@functools.cache
def mrg_tables():
    """{(modulus index 1 or 2, "offset" or "subsequence"): the 64 matrices A^(2^k) or
    A^(2^(76+k)) mod m}."""
    out = {}
    for which, a, m in ((1, MRG_A1, M1), (2, MRG_A2, M2)):
        powers, x = [], a
        for _ in range(MRG_SUBSEQUENCE_LOG2 + 64):
            powers.append(x)
            x = _matmul(x, x, m)
        out[which, "offset"] = tuple(powers[:64])
        out[which, "subsequence"] = tuple(powers[MRG_SUBSEQUENCE_LOG2:])
    return out


def mrg_skip(s1, s2, n: int, sequence=False):
    """``skipahead(n)`` (or ``skipahead_subsequence(n)``: n · 2^76 steps, n masked to 51
    bits)."""
    n &= (1 << (MRG_SUBSEQUENCE_BITS if sequence else 64)) - 1
    tables = mrg_tables()
    what = "subsequence" if sequence else "offset"
    for k in range(64):
        if (n >> k) & 1:
            s1 = mrg_matvec(tables[1, what][k], s1, M1)
            s2 = mrg_matvec(tables[2, what][k], s2, M2)
    return s1, s2


def mrg_init(seed: int, seq: int, off: int):
    s1, s2 = mrg_start(seed)
    s1, s2 = mrg_skip(s1, s2, seq, sequence=True)
    return mrg_skip(s1, s2, off)

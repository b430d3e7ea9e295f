"""A thread's random stream (``T.rng_init``), as the device program holds it: a local
array of ``WORDS`` uint32 (``frontend/random_draws.py`` allocates it; the GPU's lowering,
``codegen/lowering/random.py``, and the simulator, ``sim/random.py``, read and write it).

For Philox the words are cuRAND's ``curandStatePhilox4_32_10_t``: the key (the seed's
low and high halves), the 128-bit counter (x, y: the stream's position / 4; z, w: the
subsequence), the Philox output of the counter, the index of the next output word. For
XORWOW the first six words are ``v[0..4]`` and ``d``; for MRG32k3a ``s1[0..2]`` and
``s2[0..2]`` (``ir/random_generators.py``). Then, for every generator, the Box–Muller
caches of ``curand_normal`` (a flag and the float's bits) and ``curand_normal_double``
(a flag and the double's two halves), and whether ``T.rng_init`` has run (the
simulator's check; the GPU sets it too).

A kernel draws from one generator, a compile-time literal of every marker
(``PHILOX``, ``XORWOW``, ``MRG32K3A``).
"""
KEY = 0            # 2 words
COUNTER = 2        # 4 words, x first
OUTPUT = 6         # 4 words
INDEX = 10
NORMAL_FLAG = 11
NORMAL_EXTRA = 12
NORMAL_FLAG_DOUBLE = 13
NORMAL_EXTRA_DOUBLE = 14   # 2 words, the low half first
READY = 16
WORDS = 17

SEQUENTIAL = 0     # XORWOW's v[0..4], d; MRG32k3a's s1[0..2], s2[0..2]: 6 words
SEQUENTIAL_WORDS = 6

# the generators (the markers' last literal argument), by TileLang's names
PHILOX, XORWOW, MRG32K3A = range(3)
GENERATOR_NAMES = {"curandStatePhilox4_32_10_t": PHILOX, "curandStateXORWOW_t": XORWOW,
                   "curandStateMRG32k3a_t": MRG32K3A}

# the kinds of draw (the markers' literal argument) and the stream words each takes
UINT32, UNIFORM, UNIFORM_DOUBLE, NORMAL, NORMAL_DOUBLE = range(5)
WORDS_PER_DRAW = {UINT32: 1, UNIFORM: 1, UNIFORM_DOUBLE: 1, NORMAL: 2, NORMAL_DOUBLE: 4}
# XORWOW's double uniform takes two words (curand_uniform_double's 53 bits); MRG32k3a's
# draws take one step each, two for a normal of either width (curand_box_muller_mrg)
_WORDS = {PHILOX: WORDS_PER_DRAW,
          XORWOW: {**WORDS_PER_DRAW, UNIFORM_DOUBLE: 2},
          MRG32K3A: {**WORDS_PER_DRAW, NORMAL_DOUBLE: 2}}


def words_per_draw(generator: int, kind: int) -> int:
    """The stream words (steps) a draw of ``kind`` takes from ``generator``."""
    return _WORDS[generator][kind]

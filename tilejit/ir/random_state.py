"""A thread's random stream (``T.rng_init``), as the device program holds it: a local
array of ``WORDS`` uint32 (``frontend/random_draws.py`` allocates it; the GPU's lowering,
``codegen/lowering/random.py``, and the simulator, ``sim/random.py``, read and write it).

The words are cuRAND's ``curandStatePhilox4_32_10_t``: the key (the seed's low and high
halves), the 128-bit counter (x, y: the stream's position / 4; z, w: the subsequence),
the Philox output of the counter, the index of the next output word, the Box–Muller
caches of ``curand_normal`` (a flag and the float's bits) and ``curand_normal_double``
(a flag and the double's two halves), and whether ``T.rng_init`` has run (the
simulator's check; the GPU sets it too).
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

# the kinds of draw (the markers' literal argument) and the stream words each takes
UINT32, UNIFORM, UNIFORM_DOUBLE, NORMAL, NORMAL_DOUBLE = range(5)
WORDS_PER_DRAW = {UINT32: 1, UNIFORM: 1, UNIFORM_DOUBLE: 1, NORMAL: 2, NORMAL_DOUBLE: 4}

"""TileLang's random numbers in a kernel: ``T.rng_init``, ``T.rng_rand``,
``T.rng_rand_float`` (cuRAND's device API, as TileLang's CUDA back end calls it).

``T.rng_init(seed, seq=None, off=0)`` starts this thread's generator: cuRAND's
``curandStatePhilox4_32_10_t`` after ``curand_init(seed, seq, off, &state)``, a
counter-based Philox4x32-10 stream keyed by ``seed`` (64 bits), subsequence ``seq``
(default: the thread's index in the grid along x, ``tx + bx * threads``) and offset
``off``. ``T.rng_rand()`` is the stream's next 32-bit word (a ``uint32``),
``T.rng_rand_float()`` a float32 in (0, 1] (``curand_uniform``), ``bit=64`` a float64
(``curand_uniform_double``: (word + 1) / 2^32), ``dist="normal"`` a standard normal
(Box–Muller on two words, the second value kept for the next call, as
``curand_normal``; ``bit=64``: four words, ``curand_normal_double``).

In a thread's own code (outside ``T.Parallel``) the numbers are cuRAND's, word for
word. A ``T.Parallel`` is the block's: which thread runs an iteration is the
compiler's layout, so an iteration's draws are keyed by the iteration, not by the
order a thread meets them. Iteration ``e`` (row-major) of a loop whose body draws ``K``
words (1 per ``T.rng_rand()`` / uniform, 2 per float normal, 4 per double normal)
reads words ``p + e·K …`` of the stream of the thread that runs it, ``p`` that
thread's position when the loop starts; every thread's position then moves past the
``total·K`` words. The numbers are the same whatever the layout when the threads'
streams agree at the loop (the same seed, subsequence and offset); a normal drawn there
is the first of its Box–Muller pair.

``generator=`` picks cuRAND's ``curandStateXORWOW_t`` or ``curandStateMRG32k3a_t``
instead (``ir/random_generators.py``): the same ``curand_init`` (subsequences of 2^67
and 2^76 steps), ``curand``, ``curand_uniform`` and ``curand_uniform_double`` (XORWOW's
takes two words, MRG32k3a's one step) and Box–Muller normals (MRG32k3a's from two
uniforms, ``curand_box_muller_mrg``). Their positions move by steps or jumps (a loop
over the count's bits); a ``T.Parallel``'s draws step on from the thread's last one
where it meets its iterations in order. A kernel draws from one generator. The
declarations here are rewritten by the front end (``frontend/random_draws.py``); called
as Python they raise.
"""
from __future__ import annotations

PHILOX = "curandStatePhilox4_32_10_t"
GENERATORS = (PHILOX, "curandStateMRG32k3a_t", "curandStateXORWOW_t")   # TileLang's names
DISTRIBUTIONS = ("uniform", "normal")


def _in_kernel_only(name):
    raise RuntimeError(f"T.{name} is only meaningful in the body of a `with T.Kernel(...)` "
                       "block of a kernel")


def rng_init(seed, seq=None, off=0, generator=PHILOX):
    """Start this thread's random stream: ``curand_init(seed, seq, off)`` of
    ``generator`` (Philox by default)."""
    _in_kernel_only("rng_init")


def rng_rand():
    """The next 32-bit word of this thread's stream (uint32)."""
    _in_kernel_only("rng_rand")


def rng_rand_float(bit=32, dist="uniform"):
    """A float32 (``bit=32``) or float64 (``bit=64``) draw, uniform in (0, 1] or a
    standard normal (``dist="normal"``)."""
    _in_kernel_only("rng_rand_float")

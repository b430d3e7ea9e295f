"""TileLang's random numbers (``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``): cuRAND's
Philox4x32-10 stream, word for word, in the simulator and on the GPU.

The reference here is a plain-Python Philox (checked against Random123's known answers)
with cuRAND's ``curand_init`` (key = seed, counter = (offset / 4, subsequence), the
word index offset % 4), written from cuRAND's definition and independent of tilejit's two
implementations. The GPU's lowering is also run on this CPU (its IR JIT-compiled for the
host), draw by draw against the same reference."""
import ctypes
from fractions import Fraction

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.runtime import UninitializedReadError
from tilejit.sim.threads import ThreadCodeError
from kernel_files import kernel_module

MASK = 0xFFFFFFFF


def philox_ref(ctr, key):
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
    return c


def curand_words(seed, seq, off, n):
    """The first ``n`` words of ``curand`` after ``curand_init(seed, seq, off)``."""
    out = []
    for i in range(n):
        pos = off + i
        block = pos >> 2
        ctr = [block & MASK, (block >> 32) & MASK, seq & MASK, (seq >> 32) & MASK]
        out.append(philox_ref(ctr, [seed & MASK, (seed >> 32) & MASK])[pos & 3])
    return np.array(out, dtype=np.uint32)


def uniform_ref(words):
    return np.asarray(words, np.uint32).astype(np.float32) * np.float32(2.0 ** -32) + \
        np.float32(2.0 ** -33)


def rounded_once(exact: Fraction, dtype=np.float32) -> float:
    """``exact`` rounded once to ``dtype`` (nearest, ties to even)."""
    guess = dtype(float(exact))
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    best = min((np.nextafter(guess, dtype(-np.inf)), guess, np.nextafter(guess, dtype(np.inf))),
               key=lambda c: (abs(Fraction(float(c)) - exact),
                              int(dtype(c).view(bits)) & 1))
    return float(best)


def _to_float32(exact: Fraction) -> float:
    return rounded_once(exact, np.float32)


PI = np.longdouble("3.14159265358979323846264338327950288")
TWO_PI_F = Fraction(float(np.float32(6.2831855)))          # cuRAND's 6.2831855f


def normal_pair_ref(x, y):
    """cuRAND's float Box–Muller of words x, y from its definition: u and v rounded once
    to float32 (``v = fma(float(y), C, C/2)``), the rest exact (long double)."""
    u = _to_float32(Fraction(int(x)) / 2 ** 32 + Fraction(1, 2 ** 33))
    c = TWO_PI_F / 2 ** 32
    v = _to_float32(Fraction(float(np.float32(int(y)))) * c + c / 2)
    s = np.sqrt(-2 * np.log(np.longdouble(u)))
    return float(np.sin(np.longdouble(v)) * s), float(np.cos(np.longdouble(v)) * s)


def normal_double_ref(x0, x1, y0, y1):
    """cuRAND's double Box–Muller of four words: u, v rounded once to double, ``sin πv``
    with the argument reduced exactly (long double)."""
    zx = int(x0) ^ (int(x1) << 21)
    zy = int(y0) ^ (int(y1) << 21)
    u = float(Fraction(zx, 2 ** 53) + Fraction(1, 2 ** 54))
    v = float(Fraction(zy, 2 ** 52) + Fraction(1, 2 ** 53))
    q = np.floor(2 * v + 0.5)
    r = np.longdouble(v - q / 2) * PI
    s = np.sqrt(-2 * np.log(np.longdouble(u)))
    k = int(q) % 4
    sin = [np.sin(r), np.cos(r), -np.sin(r), -np.cos(r)][k]
    cos = [np.cos(r), -np.sin(r), -np.cos(r), np.sin(r)][k]
    return float(sin * s), float(cos * s)


@pytest.mark.parametrize("ctr, key, expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
])
def test_philox_known_answers(ctr, key, expected):
    """Random123's known answers for philox4x32-10: the reference, the simulator's."""
    from tilejit.sim.random import philox
    assert tuple(philox_ref(ctr, key)) == expected
    assert tuple(int(w) for w in philox(*ctr, *key)) == expected


# -- the GPU's lowering, JIT-compiled for this CPU ------------------------------------

class _Context:
    def get_dummy_value(self):
        return None


def _host_stream(seed, seq, off, plan, gen=0):
    """Run the GPU lowering's init and draws on this CPU: ``plan`` is a list of
    (kind, word or None); returns the draws as float64 / uint32 values. ``gen``: the
    generator (ir/random_state: 0 Philox, 1 XORWOW, 2 MRG32k3a)."""
    import llvmlite.binding as ll
    from llvmlite import ir
    from numba.core import types
    from tilejit.codegen.lowering import random as lr
    from tilejit.ir import random_state as rs
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    module = ir.Module("host_random")
    module.triple = ll.get_process_triple()
    i64, f64 = ir.IntType(64), ir.DoubleType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f64.as_pointer()]), "draws")
    b = ir.IRBuilder(fn.append_basic_block())
    state = b.alloca(ir.ArrayType(ir.IntType(32), rs.WORDS))
    state = b.bitcast(state, ir.IntType(32).as_pointer())
    generator = types.IntegerLiteral(gen)

    def sig(*args):
        return type("S", (), {"args": (None, *args, generator)})
    lr.rng_init_impl(_Context(), b, sig(None, None, None),
                     [state, i64(seed), i64(seq), i64(off), None])
    for n, (kind, word) in enumerate(plan):
        lit = types.IntegerLiteral(kind)
        if word is None:
            value = lr.rng_next_impl(_Context(), b, sig(lit), [state, None, None])
        elif word == "skip":
            lr.rng_skip_impl(_Context(), b, sig(None), [state, i64(kind), None])
            continue
        else:
            value = lr.rng_at_impl(_Context(), b, sig(lit, None),
                                   [state, None, i64(word), None])
        if isinstance(value.type, ir.IntType):
            value = b.uitofp(value, f64)
        elif value.type != f64:
            value = b.fpext(value, f64)
        b.store(value, b.gep(fn.args[0], [i64(n)]))
    b.ret_void()
    llmod = ll.parse_assembly(str(module))
    llmod.verify()
    tm = ll.Target.from_default_triple().create_target_machine(opt=2)
    engine = ll.create_mcjit_compiler(llmod, tm)
    engine.finalize_object()
    out = np.zeros(len(plan), np.float64)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address("draws"))(
        out.ctypes.data)
    return [v for v, (_, w) in zip(out, plan) if w != "skip"]


@pytest.mark.parametrize("seed, seq, off", [(42, 0, 0), (0, 0, 0), (42, 1, 5),
                                            (0xDEADBEEFCAFEF00D, 7, 1000003),
                                            (3, 2 ** 40 + 9, (2 ** 32 - 1) * 4 + 2)])
def test_the_gpu_lowering_draws_curands_words(seed, seq, off):
    """curand's words in order across counter blocks (and a 32-bit counter carry), the
    uniforms bit for bit, positions read by a T.Parallel iteration and a skip after it."""
    from tilejit.ir import random_state as rs
    words = curand_words(seed, seq, off, 30)
    plan = [(rs.UINT32, None)] * 9 + [(rs.UNIFORM, None), (rs.UNIFORM_DOUBLE, None)] + \
        [(rs.UINT32, 0), (rs.UINT32, 6), (rs.UNIFORM, 3), (rs.UNIFORM_DOUBLE, 2),
         (10, "skip"), (rs.UINT32, None)]
    got = _host_stream(seed, seq, off, plan)
    np.testing.assert_array_equal(np.array(got[:9], np.uint32), words[:9])
    assert np.float32(got[9]) == uniform_ref([words[9]])[0]
    assert got[10] == (float(words[10]) + 1.0) / 2.0 ** 32
    assert [int(got[11]), int(got[12])] == [words[11], words[17]]
    assert np.float32(got[13]) == uniform_ref([words[14]])[0]
    assert got[14] == (float(words[13]) + 1.0) / 2.0 ** 32
    assert int(got[15]) == words[21]            # 11 drawn, 10 skipped


def test_offsets_and_seeds_as_curand_converts_them():
    """A negative offset or seed is its unsigned 64-bit value, as in curand_init(unsigned
    long long …): the stream runs on past 2^64 words of offset without wrapping."""
    from tilejit.ir import random_state as rs
    off = 2 ** 64 - 1
    words = curand_words(2 ** 64 - 5, 3, off, 24)
    plan = [(rs.UINT32, None)] * 4 + [(rs.UINT32, 2), (10, "skip"), (rs.UINT32, None),
                                      (rs.UINT32, 0)]
    got = [int(v) for v in _host_stream(-5, 3, -1, plan)]
    assert got == [words[0], words[1], words[2], words[3], words[6], words[14], words[15]]


def test_the_gpu_lowering_draws_curands_normals():
    """curand_normal: a pair's sin branch, then its cached cos branch; a T.Parallel's
    normal is its pair's first; the double's four words; each within a few ulp of the
    exact Box–Muller value of cuRAND's words."""
    from tilejit.ir import random_state as rs
    words = curand_words(9, 3, 1, 8)
    got = _host_stream(9, 3, 1, [(rs.NORMAL, None), (rs.NORMAL, None), (rs.NORMAL, 2),
                                 (rs.NORMAL_DOUBLE, 4), (rs.NORMAL_DOUBLE, None),
                                 (rs.NORMAL_DOUBLE, None)])
    first, second = normal_pair_ref(words[0], words[1])
    np.testing.assert_allclose(got[:3], [first, second, normal_pair_ref(*words[4:6])[0]],
                               rtol=5e-7)
    np.testing.assert_allclose(got[4:], normal_double_ref(*words[2:6]), rtol=2e-15)
    np.testing.assert_allclose(got[3], normal_double_ref(*curand_words(9, 3, 7, 4))[0],
                               rtol=2e-15)


def test_normals_near_the_zeros_of_sin_and_cos():
    """Box–Muller's angle near a multiple of π/2 (the double's v near 1, the float's near
    π): the GPU's lowering and the simulator both reduce it exactly (a product ``π·v``
    rounded first would be thousands of ulps off)."""
    from tilejit.ir import random_state as rs
    from tilejit.sim.random import box_muller, box_muller_double
    cases = [(123456789, 987654321, 5, 1 << 31), (1, 2, 0xFFFFFFFF, 0x3FF)]
    for x0, x1, y0, y1 in cases:
        ref = normal_double_ref(x0, x1, y0, y1)
        np.testing.assert_allclose(box_muller_double(x0, x1, y0, y1), ref, rtol=2e-15)
    for x, y in [(7, 0x7FFFFFFF), (99, 0x40000000), (5, 0xBFFFFFFF)]:
        ref = normal_pair_ref(x, y)
        np.testing.assert_allclose([float(v) for v in box_muller(x, y)], ref, rtol=5e-7)
    # the GPU's, through a stream whose words are these: off = 0, seq, key found by search
    words = curand_words(11, 0, 0, 4)
    got = _host_stream(11, 0, 0, [(rs.NORMAL_DOUBLE, None), (rs.NORMAL_DOUBLE, None)])
    np.testing.assert_allclose(got, normal_double_ref(*words), rtol=2e-15)


# -- kernels, as TileLang writes them -------------------------------------------------

def rand_1d(M=512, seed=42, threads=1):
    num_per_thread = 128 // threads

    @T.prim_func
    def main(A: T.Tensor((M,), "uint32"), B: T.Tensor((M,), "float32"),
             C: T.Tensor((M,), "float64"), D: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 128), threads=threads) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * 128 + tx * num_per_thread)
            for i, j in T.Parallel(threads, num_per_thread):
                idx = bx * 128 + i * num_per_thread + j
                if idx < M:
                    A[idx] = T.rng_rand()
            for i, j in T.Parallel(threads, num_per_thread):
                idx = bx * 128 + i * num_per_thread + j
                if idx < M:
                    B[idx] = T.rng_rand_float()
            for i, j in T.Parallel(threads, num_per_thread):
                idx = bx * 128 + i * num_per_thread + j
                if idx < M:
                    C[idx] = T.rng_rand_float(bit=64)
            for i, j in T.Parallel(threads, num_per_thread):
                idx = bx * 128 + i * num_per_thread + j
                if idx < M:
                    D[idx] = T.rng_rand_float(dist="normal")
    return main


def _rand_1d_expected(M, seed):
    """One thread per block, so its T.Parallel draws are curand's sequence: element j of
    block b is word j of loop 0 after curand_init(seed, 0, 128 b), and so on."""
    a, b, c, d = (np.zeros(M, t) for t in (np.uint32, np.float32, np.float64, np.float32))
    for blk in range(-(-M // 128)):
        w = curand_words(seed, 0, 128 * blk, 128 * 5)
        n = min(128, M - 128 * blk)
        s = slice(128 * blk, 128 * blk + n)
        a[s] = w[:n]
        b[s] = uniform_ref(w[128:128 + n])
        c[s] = (w[256:256 + n].astype(np.float64) + 1.0) / 2.0 ** 32
        d[s] = [normal_pair_ref(w[384 + 2 * j], w[385 + 2 * j])[0] for j in range(n)]
    return a, b, c, d


def _arrays(M):
    return [np.zeros(M, t) for t in (np.uint32, np.float32, np.float64, np.float32)]


@pytest.mark.parametrize("M, seed", [(512, 123), (300, 0)])
def test_tilelangs_one_thread_kernel_draws_curands_sequence(M, seed):
    kernel = tilejit.compile(rand_1d(M, seed), target="sim")
    out = _arrays(M)
    kernel(*out)
    a, b, c, d = _rand_1d_expected(M, seed)
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[1], b)
    np.testing.assert_array_equal(out[2], c)
    np.testing.assert_allclose(out[3], d, rtol=1e-6, atol=1e-7)


def test_the_ptx_keeps_the_stream_in_registers(ptxas):
    """Philox's rounds as 32-bit high and low products by its two multipliers; no local
    memory."""
    import re
    kernel = tilejit.compile(rand_1d(512, 1), target="cuda -arch=sm_90a")
    ptx = kernel.get_kernel_source()
    for m in (0xD2511F53, 0xCD9E8D57):
        assert re.search(rf"[ ,]({m}|{m - 2 ** 32});", ptx), hex(m)
        assert not re.search(rf"mul\.lo\.s64\s+[^;]*\b{m};", ptx)   # no 64-bit product
    assert ptx.count("mul.hi.u32") >= 20            # 2 a round, 10 rounds a block
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(rand_1d(512, 1), target=f"cuda -arch={arch}").get_kernel_source()
        report = ptxas(ptx, arch)
        assert "0 bytes stack frame" in report and ".local" not in ptx


@tilejit.kernel
def block_streams(A, B, seed, threads: T.constexpr = 128):
    """The block's stream (its index as the subsequence), the same in every thread: the
    draws do not depend on the layout."""
    with T.Kernel(4, threads=threads) as bx:
        T.rng_init(seed, bx)
        for i, j in T.Parallel(16, 64):
            A[bx, i, j] = T.rng_rand()
            if j % 3 == 0:
                B[bx, i, j] = T.rng_rand_float(dist="normal")
        for i in T.Parallel(64):
            B[bx, 16, i] = T.rng_rand_float()


def _block_streams_expected(seed):
    a = np.zeros((4, 16, 64), np.uint32)
    b = np.zeros((4, 17, 64), np.float32)
    for blk in range(4):
        w = curand_words(seed, blk, 0, 16 * 64 * 3 + 64)
        for e in range(16 * 64):
            i, j = divmod(e, 64)
            a[blk, i, j] = w[3 * e]
            if j % 3 == 0:
                b[blk, i, j] = normal_pair_ref(w[3 * e + 1], w[3 * e + 2])[0]
        b[blk, 16] = uniform_ref(w[3 * 1024:])
    return a, b


@pytest.mark.parametrize("threads", [32, 128, 256])
def test_a_parallel_loops_draws_are_keyed_by_the_iteration(threads):
    a, b = np.zeros((4, 16, 64), np.uint32), np.zeros((4, 17, 64), np.float32)
    tilejit.kernel(block_streams.func, target="sim")(a, b, 5, threads=threads)
    ea, eb = _block_streams_expected(5)
    np.testing.assert_array_equal(a, ea)
    np.testing.assert_allclose(b, eb, rtol=1e-6, atol=1e-7)


@tilejit.kernel
def thread_streams(A, D, E, seed: T.constexpr = 7):
    """TileLang's default subsequence (the thread's index in the grid), drawn in each
    thread's own code: curand's per-thread sequences, normals cached in pairs."""
    with T.Kernel(2, threads=64) as bx:
        tx = T.get_thread_binding()
        T.rng_init(seed)
        for k in T.serial(4):
            A[bx * 64 + tx, k] = T.rng_rand()
            D[bx * 64 + tx, k] = T.rng_rand_float(dist="normal")
        if tx % 2 == 0:
            E[bx * 64 + tx] = T.rng_rand_float(bit=64)


def _thread_streams_expected(seed):
    a = np.zeros((128, 4), np.uint32)
    d = np.zeros((128, 4), np.float32)
    e = np.zeros(128, np.float64)
    for t in range(128):
        w = curand_words(seed, t, 0, 10)
        a[t] = w[[0, 1, 4, 5]]      # normal pairs: words 1-2 at k = 0, 5-6 at k = 2
        d[t, 0], d[t, 1] = normal_pair_ref(w[1], w[2])
        d[t, 2], d[t, 3] = normal_pair_ref(w[5], w[6])
        a[t, 1], a[t, 3] = w[3], w[7]
        if t % 2 == 0:
            e[t] = (float(w[8]) + 1.0) / 2.0 ** 32
    return a, d, e


def test_each_threads_own_draws_are_curands():
    a, d, e = np.zeros((128, 4), np.uint32), np.zeros((128, 4), np.float32), np.zeros(128)
    tilejit.kernel(thread_streams.func, target="sim")(a, d, e)
    ea, ed, ee = _thread_streams_expected(7)
    np.testing.assert_array_equal(a, ea)
    np.testing.assert_allclose(d, ed, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(e, ee)


@tilejit.kernel
def layout_streams(A):
    with T.Kernel(1, threads=128):
        T.rng_init(1)               # the default subsequence: the thread's own
        for i in T.Parallel(256):
            A[i] = T.rng_rand()


def test_thread_streams_in_a_parallel_loop_are_refused_in_simulation(ptxas):
    with pytest.raises(ThreadCodeError, match="inside a T.Parallel loop, where the block's "
                                              "threads hold different random streams"):
        tilejit.kernel(layout_streams.func, target="sim")(np.zeros(256, np.uint32))
    ptx = layout_streams.compile(np.zeros(256, np.uint32), target="cuda", arch="sm_90a").ptx
    ptxas(ptx, "sm_90a")       # on the GPU: each iteration reads its thread's stream


def _kernel(tmp_path, body: str, threads: int = 32):
    """A kernel of ``body`` in a file of its own (a kernel's source is read from its file)."""
    return kernel_module(tmp_path, "random_kernel",
                         "import tilejit\nimport tilejit.language as T\n\n\n@tilejit.kernel\n"
                         f"def k(A):\n    with T.Kernel(1, threads={threads}) as bx:\n"
                         + "".join(f"        {line}\n" for line in body.splitlines())).k


@pytest.mark.parametrize("body, message", [
    ("T.rng_init(1, generator='curandStateXORWOW_t')\nT.rng_init(2)\nA[0] = T.rng_rand()",
     r"T.rng_init calls with generators 'curandStateXORWOW_t' and "
     r"'curandStatePhilox4_32_10_t': a kernel draws from one generator"),
    ("T.rng_init(1, generator='mt19937')\nA[0] = T.rng_rand()",
     r"T.rng_init: generator must be one of 'curandStatePhilox4_32_10_t', "),
    ("T.rng_init(1)\nA[0] = T.rng_rand_float(bit=16)",
     r"T.rng_rand_float: bit must be one of 32, 64 known when the kernel compiles, got `16`"),
    ("T.rng_init(1)\nA[0] = T.rng_rand_float(dist='poisson')",
     r"dist must be one of 'uniform', 'normal'"),
    ("A[0] = T.rng_rand()",
     r"`T.rng_rand\(\)` with no T.rng_init\(...\) in the kernel"),
    ("for i in T.Parallel(32):\n    T.rng_init(1)",
     r"T.rng_init inside a T.Parallel loop"),
    ("T.rng_init(1)\nfor i in T.Parallel(32):\n    for k in T.serial(2):\n"
     "        A[i] = T.rng_rand()", r"a random draw in a loop inside a T.Parallel body"),
    ("x = T.rng_init(1)", r"T.rng_init\(...\) is a statement"),
    ("T.rng_init(1, 2, 3, 4, 5)", r"T.rng_init: too many positional arguments"),
    ("T.rng_init(1)\nfor i in T.Parallel(32):\n    k = 0\n    while k < 2:\n"
     "        A[i] = T.rng_rand()\n        k += 1",
     r"a random draw in a loop inside a T.Parallel body"),
    ("T.rng_init(1)\nfor i in T.Parallel(*A.shape):\n    A[i] = T.rng_rand()",
     r"names one index per extent and writes its extents one by one"),
    ("T.rng_init(1)\nA[0] = (bx < 1) and (T.rng_rand() > 0)",
     r"`T.rng_rand\(\)` in an operand that may not be evaluated"),
    ("T.rng_init(1)\nA[0] = T.rng_rand_float() if bx < 1 else 0.0",
     r"in an operand that may not be evaluated"),
    ("T.rng_init(1)\nA[0] = 0 < T.rng_rand() < 4000000000",
     r"in an operand that may not be evaluated"),
])
def test_bad_uses_are_compile_errors_on_both_targets(tmp_path, body, message):
    k = _kernel(tmp_path, body)
    a = np.zeros(32, np.float32)
    with pytest.raises(CompileError, match=message):
        k.compile(a, target="cuda", arch="sm_90a")
    with pytest.raises(CompileError, match=message):
        tilejit.kernel(k.func, target="sim")(a)


@tilejit.kernel
def typed_draws(A, bits: T.constexpr = 64, dist: T.constexpr = "uniform"):
    """bit= and dist= from the kernel's compile-time parameters."""
    with T.Kernel(1, threads=32):
        T.rng_init(3, 0, 0)
        for i in T.Parallel(32):
            A[i] = T.rng_rand_float(bit=bits, dist=dist)


def test_a_draws_kind_may_come_from_constexprs(ptxas):
    a = np.zeros(32, np.float64)
    tilejit.kernel(typed_draws.func, target="sim")(a)
    np.testing.assert_array_equal(a, (curand_words(3, 0, 0, 32) + 1.0) / 2.0 ** 32)
    b = np.zeros(32, np.float32)
    tilejit.kernel(typed_draws.func, target="sim")(b, bits=32, dist="normal")
    w = curand_words(3, 0, 0, 64)
    np.testing.assert_allclose(b, [normal_pair_ref(w[2 * i], w[2 * i + 1])[0]
                                   for i in range(32)], rtol=5e-7)
    ptxas(typed_draws.compile(a, target="cuda", arch="sm_90a").ptx, "sm_90a")


def test_draws_in_a_kernel_with_warpgroup_roles_are_refused(tmp_path):
    k = _kernel(tmp_path, "T.rng_init(1)\nwith T.ws(0):\n    A[0] = T.rng_rand()", 256)
    with pytest.raises(CompileError, match="random draws in a kernel with `with T.ws` "
                                           "warpgroup roles are not supported"):
        k.compile(np.zeros(32, np.uint32), target="cuda", arch="sm_90a")


def test_a_warpgroup_role_kernel_of_too_few_threads_is_a_compile_error(tmp_path):
    k = _kernel(tmp_path, "with T.ws(0):\n    A[0] = 1")
    with pytest.raises(CompileError, match="threads must be a multiple of 128, got 32"):
        k.compile(np.zeros(32, np.uint32), target="cuda", arch="sm_90a")


def test_a_draw_before_the_stream_starts_is_reported_in_simulation(tmp_path):
    k = _kernel(tmp_path, "A[0] = T.rng_rand()\nT.rng_init(1)")
    with pytest.raises(UninitializedReadError, match=r"T.rng_rand\(\) before T.rng_init"):
        tilejit.kernel(k.func, target="sim")(np.zeros(32, np.uint32))


# -- the GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("M, seed", [(512, 123), (300, 0)])
def test_tilelangs_one_thread_kernel_on_the_gpu(M, seed):
    import torch
    kernel = tilejit.compile(rand_1d(M, seed), target="cuda")
    dev = [torch.zeros(M, dtype=t, device="cuda")
           for t in (torch.uint32, torch.float32, torch.float64, torch.float32)]
    kernel(*dev)
    got = [t.cpu().numpy() for t in dev]
    sim = _arrays(M)
    tilejit.compile(rand_1d(M, seed), target="sim")(*sim)
    a, b, c, d = _rand_1d_expected(M, seed)
    for g, s, ref in zip(got[:3], sim[:3], (a, b, c)):
        np.testing.assert_array_equal(g, ref)
        np.testing.assert_array_equal(g, s)
    np.testing.assert_allclose(got[3], d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], sim[3], rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [32, 256])
def test_block_streams_on_the_gpu(threads):
    import torch
    a = torch.zeros((4, 16, 64), dtype=torch.uint32, device="cuda")
    b = torch.zeros((4, 17, 64), device="cuda")
    block_streams(a, b, 5, threads=threads)
    ea, eb = _block_streams_expected(5)
    np.testing.assert_array_equal(a.cpu().numpy(), ea)
    np.testing.assert_allclose(b.cpu().numpy(), eb, rtol=1e-5, atol=1e-6)
    # the statistics torch's own generator has: mean 0, variance 1, uniform mean 1/2
    normals = b[:, :16, ::3].double()
    ref = torch.randn(normals.numel(), dtype=torch.float64, device="cuda")
    assert abs(normals.mean().item() - ref.mean().item()) < 0.15
    assert abs(normals.std().item() - ref.std().item()) < 0.15
    assert abs(b[:, 16].double().mean().item() - 0.5) < 0.05


@pytest.mark.gpu
def test_each_threads_own_draws_on_the_gpu():
    import torch
    a = torch.zeros((128, 4), dtype=torch.uint32, device="cuda")
    d = torch.zeros((128, 4), device="cuda")
    e = torch.zeros(128, dtype=torch.float64, device="cuda")
    thread_streams(a, d, e)
    ea, ed, ee = _thread_streams_expected(7)
    np.testing.assert_array_equal(a.cpu().numpy(), ea)
    np.testing.assert_allclose(d.cpu().numpy(), ed, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(e.cpu().numpy(), ee)


@T.macro
def dropout_tile(X, Y, bx, p):
    """A macro that draws: inlined into the kernel, its draws the kernel's."""
    for i in T.Parallel(64):
        keep = T.rng_rand_float() > p
        Y[bx * 64 + i] = T.if_then_else(keep, X[bx * 64 + i] / (1.0 - p), 0.0)


@tilejit.kernel
def dropout(X, Y, seed):
    with T.Kernel(2, threads=64) as bx:
        T.rng_init(seed, bx)
        dropout_tile(X, Y, bx, 0.25)


def test_a_macro_that_draws_is_inlined():
    x = np.arange(1, 129, dtype=np.float32)
    y = np.zeros(128, np.float32)
    tilejit.kernel(dropout.func, target="sim")(x, y, 9)
    keep = np.concatenate([uniform_ref(curand_words(9, b, 0, 64)) > np.float32(0.25)
                           for b in range(2)])
    np.testing.assert_allclose(y, np.where(keep, x / np.float32(0.75), 0), rtol=1e-6)


@pytest.mark.gpu
def test_a_macro_that_draws_on_the_gpu():
    import torch
    x = torch.arange(1, 129, dtype=torch.float32, device="cuda")
    y = torch.zeros(128, device="cuda")
    dropout(x, y, 9)
    sim = np.zeros(128, np.float32)
    tilejit.kernel(dropout.func, target="sim")(x.cpu().numpy(), sim, 9)
    np.testing.assert_array_equal(y.cpu().numpy(), sim)
    keep = (y != 0).double().mean().item()
    assert 0.6 < keep < 0.9                      # 0.75 expected


def test_a_draw_in_a_helper_used_in_an_expression_is_inlined(tmp_path):
    """``noisy(A[i]) * 2``: the call is bound to a name first and inlined, so it draws
    from the kernel's stream as the draw written in place does."""
    source = ("import tilejit\nimport tilejit.language as T\n\n\ndef noisy(x):\n"
              "    return x + T.rng_rand_float()\n\n\n@tilejit.kernel\ndef k(A):\n"
              "    with T.Kernel(1, threads=32):\n        T.rng_init(1, 0, 0)\n"
              "        for i in T.Parallel(32):\n            A[i] = noisy(A[i]) * 2\n\n\n"
              "@tilejit.kernel\ndef inline(A):\n"
              "    with T.Kernel(1, threads=32):\n        T.rng_init(1, 0, 0)\n"
              "        for i in T.Parallel(32):\n"
              "            A[i] = (A[i] + T.rng_rand_float()) * 2\n")
    module = kernel_module(tmp_path, "noisy", source)
    a, b = np.ones(32, np.float32), np.ones(32, np.float32)
    module.k(a)
    module.inline(b)
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) > 16
    module.k.compile(np.zeros(32, np.float32), target="cuda", arch="sm_90a")


def test_a_draw_in_a_helper_evaluated_only_sometimes_is_named(tmp_path):
    module = kernel_module(
        tmp_path, "noisy2", "import tilejit\nimport tilejit.language as T\n\n\n"
        "def noisy(x):\n    return x + T.rng_rand_float()\n\n\n@tilejit.kernel\ndef k(A):\n"
        "    with T.Kernel(1, threads=32):\n        T.rng_init(1, 0, 0)\n"
        "        for i in T.Parallel(32):\n"
        "            A[i] = noisy(A[i]) * 2 if i > 3 else A[i]\n")
    with pytest.raises(CompileError, match=r"T.rng_rand_float in a helper compiled by itself"):
        module.k.compile(np.zeros(32, np.float32), target="cuda", arch="sm_90a")


@tilejit.kernel
def seeded(A, seed):
    with T.Kernel(1, threads=32):
        T.rng_init(seed, 0, 0)
        for i in T.Parallel(32):
            A[i] = T.rng_rand()


def test_a_64_bit_unsigned_seed_as_a_run_time_argument():
    """torch.initial_seed() may be 2^63 or more: as np.uint64 its bits are the key (a
    Python int that large does not fit the int64 a scalar argument is, and says how)."""
    seed = 2 ** 64 - 12345
    a = np.zeros(32, np.uint32)
    tilejit.kernel(seeded.func, target="sim")(a, np.uint64(seed))
    np.testing.assert_array_equal(a, curand_words(seed, 0, 0, 32))
    with pytest.raises(ValueError, match=r"does not fit in int64; pass np.uint64"):
        tilejit.kernel(seeded.func, target="sim")(a, seed)
    seeded.compile(a, np.uint64(seed), target="cuda", arch="sm_90a")


@pytest.mark.gpu
def test_a_64_bit_unsigned_seed_on_the_gpu():
    import torch
    seed = 2 ** 64 - 12345
    a = torch.zeros(32, dtype=torch.uint32, device="cuda")
    seeded(a, np.uint64(seed))
    np.testing.assert_array_equal(a.cpu().numpy(), curand_words(seed, 0, 0, 32))

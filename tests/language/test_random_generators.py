"""cuRAND's XORWOW and MRG32k3a generators (``T.rng_init(..., generator=...)``): the
numbers (``ir/random_generators.py``) against definitions written here from cuRAND's and
L'Ecuyer's, the GPU's lowering run on this CPU draw by draw, the simulator's kernels, the
PTX through ptxas, and the GPU against the simulator.

The references: XORWOW stepped from its salted seed, its subsequence jump (2^67 steps)
as a 160×160 matrix over GF(2) squared 67 times; MRG32k3a stepped by its recurrences,
its subsequence jump (2^76 steps) as 3×3 matrix powers; one known answer derived by hand
from the recurrences (seed 0: all six state words 12345)."""
import functools

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.ir import random_generators as g
from tilejit.ir import random_state as rs
from test_random import _host_stream

MASK = 0xFFFFFFFF
XORWOW, MRG = "curandStateXORWOW_t", "curandStateMRG32k3a_t"


# -- references written from the generators' definitions ---------------------------------

def xorwow_ref(seed, n, v=None, d=None):
    """``n`` words of XORWOW from ``curand_init(seed, 0, 0)`` (or from state v, d)."""
    if v is None:
        s0, s1 = (seed & MASK) ^ 0xAAD26B49, (seed >> 32) ^ 0xF7DCEFDD
        t0, t1 = (1099087573 * s0) & MASK, (2591861531 * s1) & MASK
        v = [(123456789 + t0) & MASK, 362436069 ^ t0, (521288629 + t1) & MASK,
             88675123 ^ t1, (5783321 + t0) & MASK]
        d = (6615241 + t1 + t0) & MASK
    out = []
    for _ in range(n):
        t = v[0] ^ (v[0] >> 2)
        v = v[1:] + [(v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & MASK]
        d = (d + 362437) & MASK
        out.append((v[4] + d) & MASK)
    return out, v, d


@functools.cache
def xorwow_subsequence_matrix():
    """M^(2^67) over GF(2), M the step of the five words (bit 32·w + b)."""
    m = np.zeros((160, 160), np.int64)
    for col in range(160):
        v = [0] * 5
        v[col // 32] = 1 << (col % 32)
        t = v[0] ^ (v[0] >> 2)
        stepped = v[1:] + [(v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & MASK]
        for row in range(160):
            m[row, col] = (stepped[row // 32] >> (row % 32)) & 1
    for _ in range(67):
        m = (m @ m) % 2
    return m


def _bits(v):
    return np.array([(v[i // 32] >> (i % 32)) & 1 for i in range(160)], np.int64)


def _words(bits):
    return [sum(int(bits[32 * w + b]) << b for b in range(32)) for w in range(5)]


M1, M2 = 4294967087, 4294944443
# CUDA 11.6's curand_kernel.h: MRG32K3A_NORM (1/m1) and MRG32K3A_BITS_NORM
MRG_NORM, MRG_BITS_NORM = 2.3283065498378288e-10, 1.000000048662


def curand_word(gen, w):
    """``curand()``'s value of a stream word: MRG32k3a's scaled to 32 bits."""
    return int(w * MRG_BITS_NORM) if gen == rs.MRG32K3A else w


def mrg_ref(s1, s2, n):
    out = []
    for _ in range(n):
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
        s1, s2 = [s1[1], s1[2], p1], [s2[1], s2[2], p2]
        out.append(p1 - p2 if p1 > p2 else p1 - p2 + M1)
    return out, s1, s2


def _matpow(a, e, m):
    result = [[int(i == j) for j in range(3)] for i in range(3)]
    while e:
        if e & 1:
            result = [[sum(result[i][k] * a[k][j] for k in range(3)) % m for j in range(3)]
                      for i in range(3)]
        a = [[sum(a[i][k] * a[k][j] for k in range(3)) % m for j in range(3)]
             for i in range(3)]
        e >>= 1
    return result


# -- the numbers -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 42, 0xDEADBEEFCAFEF00D])
def test_xorwow_steps_and_offsets(seed):
    words, _, _ = xorwow_ref(seed, 1040)
    v, d = g.xorwow_init(seed, 0, 0)
    got = []
    for _ in range(16):
        v, d, w = g.xorwow_next(v, d)
        got.append(w)
    assert got == words[:16]
    for off in (1, 7, 1000):
        v, d = g.xorwow_init(seed, 0, off)
        assert [g.xorwow_next(v, d)[2]] == words[off:off + 1]


@pytest.mark.parametrize("seq", [1, 3])
def test_xorwow_subsequences_are_2_to_the_67_steps_apart(seq):
    _, v, d = xorwow_ref(9, 0)
    bits = _bits(v)
    for _ in range(seq):
        bits = (xorwow_subsequence_matrix() @ bits) % 2
    assert g.xorwow_init(9, seq, 0) == (_words(bits), d)


def test_mrg32k3a_known_answer_and_offsets():
    """Seed 0 leaves all six words at 12345: p1 = 592852·12345 mod m1 = 3023790853,
    p2 = -842977·12345 mod m2 = 2478282264, the first word their difference."""
    s1, s2 = g.mrg_init(0, 0, 0)
    assert g.mrg_next(s1, s2)[2] == 3023790853 - 2478282264 == 545508589
    assert g.NORM == MRG_NORM and g.BITS_NORM == MRG_BITS_NORM
    seeded = g.mrg_start(77)
    words, _, _ = mrg_ref(*seeded, 600)
    for off in (0, 1, 599):
        s1, s2 = g.mrg_init(77, 0, off)
        assert g.mrg_next(s1, s2)[2] == words[off]


def test_mrg32k3a_subsequences_are_2_to_the_76_steps_apart():
    a1 = [[0, 1, 0], [0, 0, 1], [M1 - 810728, 1403580, 0]]
    a2 = [[0, 1, 0], [0, 0, 1], [M2 - 1370589, 0, 527612]]
    s1, s2 = g.mrg_start(5)
    for seq in (1, 6):
        j1, j2 = _matpow(a1, seq << 76, M1), _matpow(a2, seq << 76, M2)
        want = ([sum(j1[i][k] * s1[k] for k in range(3)) % M1 for i in range(3)],
                [sum(j2[i][k] * s2[k] for k in range(3)) % M2 for i in range(3)])
        assert g.mrg_init(5, seq, 0) == want
    # the GPU's code masks the subsequence to cuRAND's valid 51 bits (the simulator
    # refuses more: test_an_mrg32k3a_subsequence_past_cuRANDs_range_is_refused)
    assert g.mrg_init(5, (1 << 51) + 6, 0) == g.mrg_init(5, 6, 0)


@tilejit.kernel
def mrg_at(A, seq):
    with T.Kernel(1, threads=32):
        T.rng_init(7, seq, 0, generator=MRG)
        for i in T.Parallel(32):
            A[i] = T.rng_rand()


@pytest.mark.parametrize("seq", [1 << 51, (1 << 53) + 3, -1])
def test_an_mrg32k3a_subsequence_past_cuRANDs_range_is_refused(seq):
    # real cuRAND (H100, 2026-12-07) left a zero state at 2^51 + 3: every draw m1
    with pytest.raises(ValueError, match=r"argument `seq`: expected 0 … 2\^51 - 1 "
                                         r"\(cuRAND's valid range\), got " + str(seq)):
        tilejit.kernel(mrg_at.func, target="sim")(np.zeros(32, np.uint32), seq)
    a = np.zeros(32, np.uint32)
    tilejit.kernel(mrg_at.func, target="sim")(a, (1 << 51) - 1)
    assert len(set(a.tolist())) == 32


# -- the GPU's lowering, run on this CPU ---------------------------------------------------

def _reference_words(gen, seed, seq, off, n):
    if gen == rs.XORWOW:
        v, d = g.xorwow_init(seed, seq, off)
        return xorwow_ref(0, n, v, d)[0]
    return mrg_ref(*g.mrg_init(seed, seq, off), n)[0]


@pytest.mark.parametrize("gen", [rs.XORWOW, rs.MRG32K3A])
@pytest.mark.parametrize("seed, seq, off", [(42, 0, 0), (0, 2, 5), (2 ** 64 - 3, 7, 1000)])
def test_the_gpu_lowering_draws_the_generators_words(gen, seed, seq, off):
    w = _reference_words(gen, seed, seq, off, 40)
    double_words = 2 if gen == rs.XORWOW else 1
    plan = [(rs.UINT32, None)] * 5 + [(rs.UNIFORM, None), (rs.UNIFORM_DOUBLE, None),
                                      (rs.UINT32, 0), (rs.UINT32, 9), (rs.UNIFORM, 3),
                                      (13, "skip"), (rs.UINT32, None)]
    got = _host_stream(seed, seq, off, plan, gen=gen)
    assert [int(x) for x in got[:5]] == [curand_word(gen, x) for x in w[:5]]
    if gen == rs.XORWOW:
        assert np.float32(got[5]) == np.float32(w[5]) * np.float32(2.0 ** -32) + \
            np.float32(2.0 ** -33)
        assert got[6] == (w[6] ^ (w[7] << 21)) * 2.0 ** -53 + 2.0 ** -54
    else:
        assert np.float32(got[5]) == np.float32(w[5] * MRG_NORM)
        assert got[6] == w[6] * MRG_NORM
    pos = 6 + double_words
    assert [int(got[7]), int(got[8])] == [curand_word(gen, w[pos]),
                                          curand_word(gen, w[pos + 9])]
    at3 = w[pos + 3]
    assert np.float32(got[9]) == (np.float32(at3 * MRG_NORM) if gen == rs.MRG32K3A else
                                  np.float32(at3) * np.float32(2.0 ** -32)
                                  + np.float32(2.0 ** -33))
    assert int(got[10]) == curand_word(gen, w[pos + 13])


@pytest.mark.parametrize("gen", [rs.XORWOW, rs.MRG32K3A])
def test_the_cursor_of_parallel_draws(gen):
    """A T.Parallel's draws read from a cursor that steps on from the last draw's words
    (a thread meets its iterations in order), jumps where far, starts again from the
    stream's position where the word is behind it, and is stale once the thread's own
    stream moves (a draw of its own, a skip)."""
    w = _reference_words(gen, 7, 2, 3, 90000)
    words = [0, 1, 2, 2, 300, 301, 5000, 4999, 70000, 70001, 12]
    # the cursor ends at word 13; the thread's own draw moves the stream by one and a
    # skip by four more: a stale cursor would read w[20] and w[22]
    plan = [(rs.UINT32, x) for x in words] + [(rs.UINT32, None), (rs.UINT32, 20),
                                              (4, "skip"), (rs.UINT32, 22), (rs.UINT32, 0)]
    got = [int(x) for x in _host_stream(7, 2, 3, plan, gen=gen)]
    want = [w[x] for x in words] + [w[0], w[1 + 20], w[1 + 4 + 22], w[1 + 4]]
    assert got == [curand_word(gen, x) for x in want]


@pytest.mark.parametrize("gen", [rs.XORWOW, rs.MRG32K3A])
def test_the_gpu_lowering_draws_the_generators_normals(gen):
    """A pair's first, then its cached second; a T.Parallel's normal is its pair's first;
    within a few ulp of the simulator's (float64 Box–Muller of the same words)."""
    from tilejit.sim import random as sr
    w = _reference_words(gen, 3, 1, 2, 12)
    got = _host_stream(3, 1, 2, [(rs.NORMAL, None), (rs.NORMAL, None), (rs.NORMAL, 4),
                                 (rs.NORMAL_DOUBLE, None), (rs.NORMAL_DOUBLE, None)], gen=gen)
    if gen == rs.XORWOW:
        pair, pair_d, n_d = sr.box_muller, sr.box_muller_double, 4
    else:
        pair, pair_d, n_d = sr.box_muller_mrg, sr.box_muller_mrg_double, 2
    first, second = (float(x) for x in pair(w[0], w[1]))
    at = float(pair(w[6], w[7])[0])       # 4 words past the position, 2
    np.testing.assert_allclose(got[:3], [first, second, at], rtol=2e-6, atol=1e-6)
    d_first, d_second = (float(x) for x in pair_d(*w[2:2 + n_d]))
    np.testing.assert_allclose(got[3:], [d_first, d_second], rtol=1e-14, atol=1e-14)


# -- kernels: TileLang's programs with the generators --------------------------------------

def rand_1d(M, seed, generator):
    """TileLang's one-thread test program (testing/python/language/…_rand.py)."""
    @T.prim_func
    def main(A: T.Tensor((M,), "uint32"), B: T.Tensor((M,), "float32"),
             C: T.Tensor((M,), "float64"), D: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 128), threads=1) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * 128 + tx * 128, generator=generator)
            for _i, j in T.Parallel(1, 128):
                if bx * 128 + j < M:
                    A[bx * 128 + j] = T.rng_rand()
            for _i, j in T.Parallel(1, 128):
                if bx * 128 + j < M:
                    B[bx * 128 + j] = T.rng_rand_float()
            for _i, j in T.Parallel(1, 128):
                if bx * 128 + j < M:
                    C[bx * 128 + j] = T.rng_rand_float(bit=64)
            for _i, j in T.Parallel(1, 128):
                if bx * 128 + j < M:
                    D[bx * 128 + j] = T.rng_rand_float(dist="normal")
    return main


def _rand_1d_expected(M, seed, gen):
    a, b = np.zeros(M, np.uint32), np.zeros(M, np.float32)
    c = np.zeros(M)
    dw = 2 if gen == rs.XORWOW else 1
    for blk in range(-(-M // 128)):
        w = _reference_words(gen, seed, 0, blk * 128, 128 * (2 + dw))
        n = min(128, M - blk * 128)
        sl = slice(blk * 128, blk * 128 + n)
        a[sl] = [curand_word(gen, x) for x in w[:n]]
        if gen == rs.XORWOW:
            b[sl] = np.array(w[128:128 + n], np.uint32).astype(np.float32) * \
                np.float32(2.0 ** -32) + np.float32(2.0 ** -33)
            c[sl] = [(w[256 + 2 * j] ^ (w[257 + 2 * j] << 21)) * 2.0 ** -53 + 2.0 ** -54
                     for j in range(n)]
        else:
            b[sl] = [np.float32(x * MRG_NORM) for x in w[128:128 + n]]
            c[sl] = [x * MRG_NORM for x in w[256:256 + n]]
    return a, b, c


@pytest.mark.parametrize("generator", [XORWOW, MRG])
def test_tilelangs_one_thread_kernel_in_simulation(generator):
    gen = rs.GENERATOR_NAMES[generator]
    out = [np.zeros(300, t) for t in (np.uint32, np.float32, np.float64, np.float32)]
    tilejit.compile(rand_1d(300, 11, generator), target="sim")(*out)
    a, b, c = _rand_1d_expected(300, 11, gen)
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[1], b)
    np.testing.assert_array_equal(out[2], c)
    assert abs(out[3].mean()) < 0.2 and 0.8 < out[3].std() < 1.2


@pytest.mark.parametrize("generator", [XORWOW, MRG])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_generators_ptx_assembles(generator, arch, ptxas):
    ptx = tilejit.compile(rand_1d(300, 11, generator)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)
    table = "__tj_xorwow_offsets" if generator == XORWOW else "__tj_mrg_offsets"
    assert table in ptx


@tilejit.kernel
def block_streams(A, B, seed, generator: T.constexpr = XORWOW, threads: T.constexpr = 128):
    """The block's stream (its index as the subsequence) in every thread: an iteration's
    words are at its row-major index times the words it draws, whichever thread runs it."""
    with T.Kernel(3, threads=threads) as bx:
        T.rng_init(seed, bx, 0, generator=generator)
        for i, j in T.Parallel(8, 64):
            A[bx, i, j] = T.rng_rand()
            B[bx, i, j] = T.rng_rand_float(bit=64)
        for i in T.Parallel(64):
            A[bx, 8, i] = T.rng_rand()


def _block_streams_expected(seed, gen):
    a, b = np.zeros((3, 9, 64), np.uint32), np.zeros((3, 8, 64))
    per = 1 + (2 if gen == rs.XORWOW else 1)
    for blk in range(3):
        w = _reference_words(gen, seed, blk, 0, 8 * 64 * per + 64)
        for e in range(8 * 64):
            i, j = divmod(e, 64)
            a[blk, i, j] = curand_word(gen, w[per * e])
            b[blk, i, j] = (w[per * e + 1] ^ (w[per * e + 2] << 21)) * 2.0 ** -53 + \
                2.0 ** -54 if gen == rs.XORWOW else w[per * e + 1] * MRG_NORM
        a[blk, 8] = [curand_word(gen, x) for x in w[8 * 64 * per:]]
    return a, b


@pytest.mark.parametrize("generator", [XORWOW, MRG])
@pytest.mark.parametrize("threads", [32, 128])
def test_a_parallel_loops_draws_are_keyed_by_the_iteration(generator, threads):
    a, b = np.zeros((3, 9, 64), np.uint32), np.zeros((3, 8, 64))
    tilejit.kernel(block_streams.func, target="sim")(a, b, 5, generator=generator,
                                                      threads=threads)
    ea, eb = _block_streams_expected(5, rs.GENERATOR_NAMES[generator])
    np.testing.assert_array_equal(a, ea)
    np.testing.assert_array_equal(b, eb)


def blockwise(M, seed, generator, guarded=False):
    """TileLang's guarded-init program: T.rng_init under a run-time guard with a block
    barrier between the init and the draw; unguarded, its baseline."""
    @T.prim_func
    def main(A: T.Tensor((M,), "uint32"), n: T.int32):
        with T.Kernel(M, threads=32) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((32,), "int32")
            if bx < n or not guarded:
                T.rng_init(seed, 0, bx, generator=generator)
                s[tx] = 1
                T.cumsum(s, dim=0)
                if tx == 0:
                    A[bx] = T.rng_rand() + T.cast(s[31], "uint32") * 0
    return main


@pytest.mark.parametrize("generator", [XORWOW, MRG])
def test_a_guarded_init_draws_what_the_baseline_draws(generator):
    gen = rs.GENERATOR_NAMES[generator]
    a = np.full(16, 0xDEADBEEF, np.uint32)
    tilejit.compile(blockwise(16, 42, generator, guarded=True), target="sim")(a, 9)
    want = [curand_word(gen, _reference_words(gen, 42, 0, b, 1)[0]) for b in range(16)]
    assert a[:9].tolist() == want[:9] and (a[9:] == 0xDEADBEEF).all()


def test_two_generators_in_one_kernel_are_refused():
    @T.prim_func
    def main(A: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=32):
            T.rng_init(1, generator=XORWOW)
            T.rng_init(2, generator=MRG)
            A[0] = T.rng_rand()
    with pytest.raises(CompileError, match="a kernel draws from one generator"):
        tilejit.compile(main, target="sim")(np.zeros(4, np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize("generator", [XORWOW, MRG])
def test_the_generators_on_the_gpu_against_the_simulator(generator):
    import torch
    gen = rs.GENERATOR_NAMES[generator]
    dtypes = (torch.uint32, torch.float32, torch.float64, torch.float32)
    out = [torch.zeros(300, dtype=t, device="cuda") for t in dtypes]
    tilejit.compile(rand_1d(300, 11, generator))(*out)
    sim = [np.zeros(300, t) for t in (np.uint32, np.float32, np.float64, np.float32)]
    tilejit.compile(rand_1d(300, 11, generator), target="sim")(*sim)
    a, b, c = _rand_1d_expected(300, 11, gen)
    np.testing.assert_array_equal(out[0].cpu().numpy(), a)
    np.testing.assert_array_equal(out[1].cpu().numpy(), b)
    np.testing.assert_array_equal(out[2].cpu().numpy(), c)
    np.testing.assert_allclose(out[3].cpu().numpy(), sim[3], rtol=2e-6, atol=2e-6)
    guarded = torch.full((64,), 0xDEADBEEF, dtype=torch.int64).to(torch.uint32).cuda()
    tilejit.compile(blockwise(64, 42, generator, guarded=True))(guarded, 37)
    base = torch.zeros(64, dtype=torch.uint32, device="cuda")
    tilejit.compile(blockwise(64, 42, generator))(base, 64)
    want = [curand_word(gen, _reference_words(gen, 42, 0, b, 1)[0]) for b in range(64)]
    assert base.cpu().tolist() == want
    assert torch.equal(guarded[:37], base[:37])
    assert (guarded[37:].cpu().to(torch.int64) == 0xDEADBEEF).all()
    for threads in (32, 128):
        a = torch.zeros((3, 9, 64), dtype=torch.uint32, device="cuda")
        b = torch.zeros((3, 8, 64), dtype=torch.float64, device="cuda")
        block_streams(a, b, 5, generator=generator, threads=threads)
        ea, eb = _block_streams_expected(5, gen)
        np.testing.assert_array_equal(a.cpu().numpy(), ea)
        np.testing.assert_array_equal(b.cpu().numpy(), eb)

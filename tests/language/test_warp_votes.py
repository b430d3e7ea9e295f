"""Warp votes (``T.any_sync``, ``T.all_sync``, ``T.ballot_sync``, ``T.ballot``,
``T.activemask``), the predicate block barriers (``T.syncthreads_count|and|or``) and the
bit searches (``T.__ffs``, ``T.__fns``) in per-thread code, as TileLang writes them: in
the simulator against numpy (several warps, masks, branches), their errors, the PTX
(``vote.sync``, ``activemask``, ``bar.red``, ``fns``, assembled by ptxas) and, with
``-m gpu``, on the device against torch and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.threads import ThreadCodeError

FULL = 0xFFFFFFFF


@tilejit.kernel
def warp_votes(P, ANY, ALL, BAL, ACT):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        p = P[tx]
        ANY[tx] = T.any_sync(p)
        ALL[tx] = T.all_sync(p != 0)
        BAL[tx] = T.cast(T.ballot_sync(p), T.int64)
        ACT[tx] = T.cast(T.activemask(), T.int64)


@tilejit.kernel
def half_warp_votes(P, ANY, ALL, BAL, FULL_BAL):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        lane = tx % 32
        p = P[tx]
        if lane < 16:
            ANY[tx] = T.any_sync(p, 0x0000FFFF)
            ALL[tx] = T.all_sync(p, 0x0000FFFF)
            BAL[tx] = T.cast(T.ballot_sync(p > 0, 0x0000FFFF), T.int64)
        else:
            ANY[tx] = T.any_sync(p, 0xFFFF0000)
            ALL[tx] = T.all_sync(p, 0xFFFF0000)
            BAL[tx] = T.cast(T.ballot_sync(p > 0, 0xFFFF0000), T.int64)
        FULL_BAL[tx] = T.cast(T.ballot(p), T.int64)


def block_votes(threads):
    @tilejit.kernel
    def kernel(P, CNT, AND, OR):
        with T.Kernel(P.shape[0] // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            p = P[bx * threads + tx]
            CNT[bx * threads + tx] = T.syncthreads_count(p)
            AND[bx * threads + tx] = T.syncthreads_and(p > 0)
            OR[bx * threads + tx] = T.syncthreads_or(p)
    return kernel


@tilejit.kernel
def bit_searches(P, FIRST, UP, DOWN, AT):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        mask = T.ballot_sync(P[tx])
        FIRST[tx] = T.__ffs(mask) - 1
        bits = T.cast(mask, T.uint32)
        UP[tx] = T.cast(T.__fns(bits, tx, 2), T.int64)
        DOWN[tx] = T.cast(T.__fns(bits, tx, -3), T.int64)
        AT[tx] = T.cast(T.__fns(bits, tx, 0), T.int64)


def _predicates(warps, seed=0):
    """Warp 0 all zero, warp 1 lane 7 only, warp 2 all set (values 1..32), then random."""
    rng = np.random.default_rng(seed)
    p = (rng.random(warps * 32) < 0.4).astype(np.int32) * rng.integers(1, 9, warps * 32)
    p[:32] = 0
    if warps > 1:
        p[32:64] = 0
        p[32 + 7] = 5
    if warps > 2:
        p[64:96] = np.arange(1, 33)
    return p.astype(np.int32)


def _ballots(p, mask=FULL):
    """Each lane's ballot over its warp's lanes in ``mask``."""
    w = (p.reshape(-1, 32) != 0) & ((mask >> np.arange(32)) & 1).astype(bool)
    return np.repeat((w.astype(np.int64) << np.arange(32)).sum(1), 32)


def _expected_votes(p):
    w = p.reshape(-1, 32) != 0
    return dict(ANY=np.repeat(w.any(1), 32).astype(np.int32),
                ALL=np.repeat(w.all(1), 32).astype(np.int32),
                BAL=_ballots(p), ACT=np.full(p.shape, FULL, np.int64))


def _vote_outputs(n, lib=np, **kw):
    return {k: lib.zeros(n, dtype=getattr(lib, "int32" if k in ("ANY", "ALL") else "int64"),
                         **kw) for k in ("ANY", "ALL", "BAL", "ACT")}


def test_votes_over_several_warps():
    p = _predicates(4)
    out = _vote_outputs(128)
    warp_votes(p, *out.values())
    for k, v in _expected_votes(p).items():
        np.testing.assert_array_equal(out[k], v, err_msg=k)


def _expected_half_warps(p):
    lane = np.arange(p.size) % 32
    low = 0x0000FFFF
    mask = np.where(lane < 16, low, FULL ^ low)
    halves = (p != 0).reshape(-1, 2, 16)
    bal = np.where(lane < 16, _ballots(np.where(p > 0, p, 0), low),
                   _ballots(np.where(p > 0, p, 0), FULL ^ low))
    assert np.all((bal & ~mask) == 0)
    return dict(ANY=np.repeat(halves.any(2), 16).astype(np.int32),
                ALL=np.repeat(halves.all(2), 16).astype(np.int32),
                BAL=bal, FULL_BAL=_ballots(p))


def _half_outputs(n, lib=np, **kw):
    return {k: lib.zeros(n, dtype=getattr(lib, "int32" if k in ("ANY", "ALL") else "int64"),
                         **kw) for k in ("ANY", "ALL", "BAL", "FULL_BAL")}


def test_votes_over_the_lanes_of_their_mask():
    p = _predicates(2, seed=3)
    p[16:32] = np.arange(1, 17)                 # warp 0's upper half: all set
    out = _half_outputs(64)
    half_warp_votes(p, *out.values())
    for k, v in _expected_half_warps(p).items():
        np.testing.assert_array_equal(out[k], v, err_msg=k)


@pytest.mark.parametrize("threads", [32, 96, 256, 48])
def test_predicate_block_barriers(threads):
    p = np.zeros(3 * threads, np.int32)
    p[threads + 5] = 2                          # block 1: one thread
    p[2 * threads:] = np.arange(1, threads + 1)  # block 2: every thread
    cnt, and_, or_ = (np.full(p.size, -1, np.int32) for _ in range(3))
    block_votes(threads)(p, cnt, and_, or_)
    np.testing.assert_array_equal(cnt, np.repeat([0, 1, threads], threads))
    np.testing.assert_array_equal(and_, np.repeat([0, 0, 1], threads))
    np.testing.assert_array_equal(or_, np.repeat([0, 1, 1], threads))


def _fns(mask, base, offset):
    """PTX fns.b32 for one lane (PTX ISA, "fns")."""
    if offset == 0:
        return base if mask >> base & 1 else FULL
    pos, count, step = base, abs(offset), 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if mask >> pos & 1:
            count -= 1
            if count == 0:
                return pos
        pos += step
    return FULL


def _expected_bits(p):
    mask = int(_ballots(p)[0])
    low = (mask & -mask).bit_length() - 1
    return dict(FIRST=np.full(32, low, np.int32),
                UP=np.array([_fns(mask, t, 2) for t in range(32)], np.int64),
                DOWN=np.array([_fns(mask, t, -3) for t in range(32)], np.int64),
                AT=np.array([_fns(mask, t, 0) for t in range(32)], np.int64))


def _bit_outputs(lib=np, **kw):
    return {k: lib.zeros(32, dtype=getattr(lib, "int32" if k == "FIRST" else "int64"), **kw)
            for k in ("FIRST", "UP", "DOWN", "AT")}


@pytest.mark.parametrize("lanes", [[7, 8, 9, 20, 31], [0], [], [3, 4, 30]])
def test_bit_searches(lanes):
    p = np.zeros(32, np.int32)
    p[lanes] = 1
    out = _bit_outputs()
    bit_searches(p, *out.values())
    for k, v in _expected_bits(p).items():
        np.testing.assert_array_equal(out[k], v, err_msg=k)


def test_python_calls_take_integer_and_boolean_predicates():
    assert T.any_sync(1) != 0 and T.all_sync(True) != 0 and T.any_sync(0) == 0
    assert int(T.ballot(True)) == FULL and int(T.ballot_sync(0)) == 0
    assert int(T.activemask()) == FULL
    assert T.syncthreads_and(1) != 0 and T.syncthreads_or(0) == 0
    assert T.__ffs(0) == 0 and T.__ffs(8) == 4 and T.__ffs(1 << 40) == 41
    assert T.__fns(0b10110, 0, 2) == 2 and T.__fns(0, 3, 1) == FULL


PREDICATED = ["any_sync", "all_sync", "ballot_sync", "ballot", "syncthreads_count",
              "syncthreads_and", "syncthreads_or"]


@pytest.mark.parametrize("name", PREDICATED)
def test_a_float_predicate_is_a_type_error(name):
    with pytest.raises(TypeError, match=f"T.{name} requires an integer or boolean predicate"):
        getattr(T, name)(0.5)


def _float_predicate_kernel(name):
    op = getattr(T, name)

    @tilejit.kernel
    def kernel(X, Y):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            Y[tx] = op(X[tx])
    return kernel


@pytest.mark.parametrize("target", ["sim", "cuda"])
@pytest.mark.parametrize("name", PREDICATED)
def test_a_float_predicate_in_a_kernel_is_a_compile_error(name, target):
    kernel = _float_predicate_kernel(name)
    x, y = np.ones(32, np.float32), np.zeros(32, np.int64)
    with pytest.raises(CompileError, match="requires an integer or boolean predicate") as e:
        if target == "sim":
            kernel(x, y)
        else:
            kernel.compile(x, y, target="cuda", arch="sm_80")
    assert e.value.lineno is not None and "Y[tx] = op(X[tx])" in str(e.value)


@tilejit.kernel
def barrier_in_a_branch(P, C):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        if tx < 32:
            C[tx] = T.syncthreads_count(P[tx])


@tilejit.kernel
def barrier_in_a_parallel_loop(P, C):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            C[i] = T.syncthreads_or(P[i])


def test_a_predicate_barrier_every_thread_must_reach():
    p, c = np.ones(64, np.int32), np.zeros(64, np.int32)
    with pytest.raises(CompileError, match="every thread of the block must reach it") as e:
        barrier_in_a_branch(p, c)
    assert "C[tx] = T.syncthreads_count(P[tx])" in str(e.value)
    with pytest.raises(CompileError, match="inside a T.Parallel loop"):
        barrier_in_a_parallel_loop(p, c)


def guarded_block_votes(threads=64):
    """TileLang's door: ``tilelang.compile`` guards each store to a tensor (safe memory
    access); the barrier in the stored value is every thread's, the guard only the
    store's (before: "inside a branch ... that depends on the thread index")."""
    @T.prim_func
    def main(A: T.Tensor((threads,), "float32"), O: T.Tensor((threads,), "int32"),
             P: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads):
            tid = T.get_thread_binding()
            O[tid] = T.syncthreads_count(A[tid] > 0)
            P[tid] += T.syncthreads_or(A[tid] > 1) + 2 * T.syncthreads_and(A[tid] > -9)
    return tilejit.compile(main)


def _guarded_expected(a):
    n = a.size
    return (np.full(n, (a > 0).sum(), np.int32),
            np.full(n, 1 + int((a > 1).any()) + 2 * int((a > -9).all()), np.int32))


def test_a_predicate_barrier_in_a_guarded_store():
    a = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    o, p = np.zeros(64, np.int32), np.ones(64, np.int32)
    kernel = guarded_block_votes()
    kernel(a, o, p)
    for got, want in zip((o, p), _guarded_expected(a)):
        np.testing.assert_array_equal(got, want)
    assert kernel.get_kernel_source(arch="sm_90a").count("bar.red") == 3


@pytest.mark.gpu
def test_gpu_a_predicate_barrier_in_a_guarded_store():
    import torch
    a = torch.randn(64, device="cuda")
    o = torch.zeros(64, dtype=torch.int32, device="cuda")
    p = torch.ones(64, dtype=torch.int32, device="cuda")
    guarded_block_votes()(a, o, p)
    for got, want in zip((o, p), _guarded_expected(a.cpu().numpy())):
        np.testing.assert_array_equal(got.cpu().numpy(), want)


@tilejit.kernel
def vote_without_its_lane(P, A):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        A[tx] = T.any_sync(P[tx], 0x0000FFFF)


@tilejit.kernel
def vote_some_lanes_skip(P, A):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx < 16:
            A[tx] = T.any_sync(P[tx])


def test_votes_undefined_on_the_gpu_are_reported():
    p, a = np.ones(32, np.int32), np.zeros(32, np.int32)
    with pytest.raises(ThreadCodeError, match="lane 16 of warp 0 calls it with mask "
                                              "0x0000ffff, which does not name the lane"):
        vote_without_its_lane(p, a)
    with pytest.raises(ThreadCodeError, match="lane 16, which the mask names, does not call"):
        vote_some_lanes_skip(p, a)


@tilejit.kernel
def active_in_branches(ACT):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        if tx % 3 == 0:
            ACT[tx] = T.cast(T.activemask(), T.int64)
        else:
            ACT[tx] = T.cast(T.activemask(), T.int64)


def test_activemask_names_the_lanes_of_the_branch():
    act = np.zeros(64, np.int64)
    active_in_branches(act)
    taken = (np.arange(64) % 3 == 0).reshape(2, 32)
    per_warp = np.repeat((taken.astype(np.int64) << np.arange(32)).sum(1), 32)
    np.testing.assert_array_equal(act, np.where(taken.reshape(-1), per_warp, FULL ^ per_warp))


def test_warp_votes_need_whole_warps_and_cuda():
    @tilejit.kernel
    def partial(P, A):
        with T.Kernel(1, threads=48):
            tx = T.get_thread_binding()
            A[tx] = T.any_sync(P[tx])
    p, a = np.ones(48, np.int32), np.zeros(48, np.int32)
    with pytest.raises(CompileError, match="needs whole warps"):
        partial(p, a)
    q = np.zeros(128, np.int32)
    with pytest.raises(CompileError, match="warp votes are built for CUDA only"):
        warp_votes.compile(q, *_vote_outputs(128).values(), target="amdgpu", arch="gfx90a")
    with pytest.raises(CompileError, match="predicate block barriers are built for CUDA"):
        block_votes(32).compile(q, q, q, q, target="amdgpu", arch="gfx90a")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_has_votes_and_barrier_reductions(arch, ptxas):
    p = np.zeros(128, np.int32)
    ptx = warp_votes.compile(p, *_vote_outputs(128).values(), target="cuda", arch=arch).ptx
    for op in ("vote.sync.any.pred", "vote.sync.all.pred", "vote.sync.ballot.b32",
               "activemask.b32"):
        assert op in ptx, op
    ptxas(ptx, arch)
    q = np.zeros(192, np.int32)
    ptx = block_votes(96).compile(q, q, q, q, target="cuda", arch=arch).ptx
    for op in ("bar.red.popc.u32", "bar.red.and.pred", "bar.red.or.pred"):
        assert op in ptx, op
    ptxas(ptx, arch)
    ptx = bit_searches.compile(np.zeros(32, np.int32), *_bit_outputs().values(),
                               target="cuda", arch=arch).ptx
    assert "fns.b32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu():
    import torch
    dev = dict(device="cuda")
    p = _predicates(4)
    out = _vote_outputs(128, torch, **dev)
    warp_votes(torch.tensor(p, **dev), *out.values())
    sim = _vote_outputs(128)
    tilejit.kernel(warp_votes.func, target="sim")(p, *sim.values())
    for k, v in _expected_votes(p).items():
        np.testing.assert_array_equal(out[k].cpu().numpy(), v, err_msg=k)
        np.testing.assert_array_equal(sim[k], v, err_msg=k)

    p = _predicates(2, seed=3)
    out = _half_outputs(64, torch, **dev)
    half_warp_votes(torch.tensor(p, **dev), *out.values())
    for k, v in _expected_half_warps(p).items():
        np.testing.assert_array_equal(out[k].cpu().numpy(), v, err_msg=k)

    for threads in (32, 96, 256, 48):
        pt = (torch.rand(3 * threads, **dev) < 0.5).to(torch.int32)
        pt[:threads] = 1
        blocks = (pt.view(3, threads) != 0)
        got = [torch.zeros(3 * threads, dtype=torch.int32, **dev) for _ in range(3)]
        block_votes(threads)(pt, *got)
        want = [blocks.sum(1), blocks.all(1), blocks.any(1)]
        for g, w in zip(got, want):
            assert torch.equal(g, w.to(torch.int32).repeat_interleave(threads))

    for lanes in ([7, 8, 9, 20, 31], [], [0, 31]):
        p = np.zeros(32, np.int32)
        p[lanes] = 1
        out = _bit_outputs(torch, **dev)
        bit_searches(torch.tensor(p, **dev), *out.values())
        for k, v in _expected_bits(p).items():
            np.testing.assert_array_equal(out[k].cpu().numpy(), v, err_msg=k)

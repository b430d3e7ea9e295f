"""Warp primitives (``T.warp_reduce_*``, ``T.shfl_*``) in per-thread code: in the
simulator against numpy, in the PTX (``shfl.sync``, assembled by ptxas) and, with
``-m gpu``, on the device against the simulator (the butterfly order makes float sums
agree bit for bit)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.sim.threads import ThreadCodeError


@tilejit.kernel
def warp_ops(X, S, M, B, XOR, DOWN, UP, BC):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        x = X[tx]
        S[tx] = T.warp_reduce_sum(x)
        M[tx] = T.warp_reduce_max(x)
        B[tx] = T.warp_reduce_bitor(T.cast(x, T.int32) & 7)
        XOR[tx] = T.shfl_xor(x, 5)
        DOWN[tx] = T.shfl_down(x, 3, 8)
        UP[tx] = T.shfl_up(x, 2)
        BC[tx] = T.shfl_sync(x, tx // 32 + 1)


def _expected(x):
    w = x.reshape(4, 32)
    lane = np.arange(128)
    seg8 = lane % 8
    return dict(
        S=np.repeat(w.sum(1, dtype=np.float64), 32),
        M=np.repeat(w.max(1), 32),
        B=np.repeat(np.bitwise_or.reduce(w.astype(np.int32) & 7, axis=1), 32),
        XOR=x[(lane // 32) * 32 + ((lane % 32) ^ 5)],
        DOWN=x[np.where(seg8 + 3 < 8, lane + 3, lane)],
        UP=x[np.where(lane % 32 >= 2, lane - 2, lane)],
        BC=x[(lane // 32) * 32 + (lane // 32 + 1)])


def _outputs(like):
    return {k: np.zeros(128, np.int32 if k == "B" else np.float32) for k in
            ("S", "M", "B", "XOR", "DOWN", "UP", "BC")}


def test_in_the_simulator():
    x = (np.arange(128, dtype=np.float32) * 0.37) % 11
    out = _outputs(x)
    warp_ops(x, *out.values())
    for k, v in _expected(x).items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_uses_shfl_sync(arch, ptxas):
    x = np.zeros(128, np.float32)
    ptx = warp_ops.compile(x, *_outputs(x).values(), target="cuda", arch=arch).ptx
    for kind in ("bfly", "down", "up", "idx"):
        assert f"shfl.sync.{kind}.b32" in ptx, kind
    ptxas(ptx, arch)


@tilejit.kernel
def half_warp(X, Y):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        if tx % 2 == 0:
            Y[tx] = T.warp_reduce_sum(X[tx])


def test_a_shuffle_some_lanes_skip_is_reported():
    with pytest.raises(ThreadCodeError, match="every lane of the warp"):
        half_warp(np.ones(64, np.float32), np.zeros(64, np.float32))


@tilejit.kernel
def block_sum(X, Y):
    """The two-level block reduction (a third-party image-metrics kernel's): each warp's
    sum to shared memory, then warp 0 alone reduces those, under a branch that holds the
    warp whole (half_warp's branch splits one: reported)."""
    with T.Kernel(1, threads=128):
        part = T.alloc_shared((4,), "float32")
        tx = T.get_thread_binding()
        warp, lane = T.get_warp_idx(), T.get_lane_idx()
        acc = T.warp_reduce_sum(X[tx])
        if lane == 0:
            part[warp] = acc
        T.sync_threads()
        if warp == 0:
            b = T.alloc_var("float32")
            b = T.float32(0)
            if lane < 4:
                b = part[lane]
            b = T.warp_reduce_sum(b)
            if lane == 0:
                Y[0] = b


def test_a_branch_that_holds_whole_warps_may_shuffle():
    x = np.arange(128, dtype=np.float32) / 7
    y = np.zeros(1, np.float32)
    block_sum(x, y)
    np.testing.assert_allclose(y[0], x.astype(np.float64).sum(), rtol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_block_sum_ptx(arch, ptxas):
    ptx = block_sum.compile(np.zeros(128, np.float32), np.zeros(1, np.float32),
                            target="cuda", arch=arch).ptx
    assert "shfl.sync.bfly.b32" in ptx and "bar.sync" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_the_block_sum_on_the_gpu():
    x = torch.rand(128) * 10
    y = torch.zeros(1, device="cuda")
    block_sum(x.cuda(), y)
    sim = np.zeros(1, np.float32)
    tilejit.kernel(block_sum.func, target="sim")(x.numpy(), sim)
    torch.testing.assert_close(y.cpu().double(), x.double().sum().reshape(1), rtol=1e-6,
                               atol=1e-5)
    assert y.cpu().numpy()[0] == sim[0]


def test_bit_reductions_take_integers():
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            Y[tx] = T.warp_reduce_bitand(X[tx])
    with pytest.raises(tilejit.CompileError, match="integer"):
        bad(np.ones(32, np.float32), np.zeros(32, np.float32))


@pytest.mark.gpu
def test_on_the_gpu():
    x = torch.rand(128, device="cuda") * 10
    out = {k: torch.zeros(128, device="cuda", dtype=torch.int32 if k == "B" else torch.float32)
           for k in ("S", "M", "B", "XOR", "DOWN", "UP", "BC")}
    warp_ops(x, *out.values())
    torch.cuda.synchronize()
    sim = _outputs(None)
    tilejit.kernel(warp_ops.func, target="sim")(x.cpu().numpy(), *sim.values())
    for k in out:
        np.testing.assert_array_equal(out[k].cpu().numpy(), sim[k], err_msg=k)


def segment_sums(width=8):
    """TileOPs' arg-reductions pass the shuffle's width (and mask) by keyword."""
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32"),
             C: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            v = T.alloc_local((1,), "float32")
            w = T.alloc_local((1,), "float32")
            v[0] = A[tx]
            w[0] = A[tx]
            for s in T.serial(3):
                v[0] = v[0] + T.shfl_xor(v[0], 4 >> s, width=width)
                w[0] = T.max(w[0], T.shfl_xor(w[0], delta=4 >> s, mask=0xFFFFFFFF,
                                              width=width))
            B[tx] = v[0]
            C[tx] = w[0]
    return main


def _segment_expected(a):
    seg = a.view(4, 8)
    return (seg.sum(1, keepdim=True).expand(4, 8).reshape(32),
            seg.amax(1, keepdim=True).expand(4, 8).reshape(32))


def test_shuffle_arguments_by_keyword(ptxas):
    a = torch.randn(32)
    b, c = tilejit.compile(segment_sums(), out_idx=[1, 2])(a)
    want = _segment_expected(a)
    torch.testing.assert_close(b, want[0], rtol=1e-6, atol=1e-6)
    assert torch.equal(c, want[1])
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(segment_sums(), out_idx=[1, 2], target=f"cuda -arch={arch}") \
            .get_kernel_source()
        assert "shfl.sync.bfly" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_shuffle_arguments_by_keyword_on_the_gpu():
    a = torch.randn(32)
    b, c = tilejit.compile(segment_sums(), out_idx=[1, 2])(a.cuda())
    want = _segment_expected(a)
    torch.testing.assert_close(b.cpu(), want[0], rtol=1e-6, atol=1e-6)
    assert torch.equal(c.cpu(), want[1])


@tilejit.kernel
def shuffles_per_iteration(X, O, T_IDX, reads_thread: T.constexpr = False,
                           branch: T.constexpr = False):
    """`for tx in T.Parallel(64)` with 64 threads: iteration k runs on thread k, so a warp
    primitive in the body runs across the iterations, as across the GPU's lanes (the
    simulator had given every iteration lane 0's result), whether or not the kernel reads
    its thread index elsewhere."""
    with T.Kernel(1, threads=64):
        if reads_thread:
            t = T.get_thread_binding()
            T_IDX[t] = t
        for tx in T.Parallel(64):
            if branch:
                if tx < 5:
                    O[tx] = T.shfl_xor(X[tx], 1)
            else:
                O[tx] = T.shfl_xor(X[tx], 1) + T.warp_reduce_sum(X[tx])


def _per_iteration_reference(x):
    x = np.asarray(x)
    return x.reshape(32, 2)[:, ::-1].reshape(64) + np.repeat(x.reshape(2, 32).sum(1), 32)


@pytest.mark.parametrize("reads_thread", [False, True])
def test_a_shuffle_in_a_loop_of_one_iteration_per_thread(reads_thread, ptxas):
    x = np.arange(64, dtype=np.float32)
    o, t = np.zeros(64, np.float32), np.zeros(64, np.int32)
    shuffles_per_iteration(x, o, t, reads_thread=reads_thread)
    np.testing.assert_array_equal(o, _per_iteration_reference(x))
    ptx = shuffles_per_iteration.compile(x, o, t, reads_thread=reads_thread, target="cuda",
                                         arch="sm_90a").ptx
    assert "shfl.sync.bfly" in ptx
    ptxas(ptx, "sm_90a")


def test_a_shuffle_some_iterations_skip_is_reported():
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(ThreadCodeError, match="depends on the T.Parallel's index"):
        shuffles_per_iteration(x, np.zeros(64, np.float32), np.zeros(64, np.int32),
                               branch=True)


@pytest.mark.gpu
@pytest.mark.parametrize("reads_thread", [False, True])
def test_a_shuffle_in_a_loop_of_one_iteration_per_thread_on_the_gpu(reads_thread):
    x = torch.randn(64)
    o = torch.zeros(64, device="cuda")
    t = torch.zeros(64, dtype=torch.int32, device="cuda")
    shuffles_per_iteration(x.cuda(), o, t, reads_thread=reads_thread)
    sim = np.zeros(64, np.float32)
    shuffles_per_iteration(x.numpy(), sim, np.zeros(64, np.int32), reads_thread=reads_thread)
    np.testing.assert_array_equal(o.cpu().numpy(), sim)
    np.testing.assert_allclose(sim, _per_iteration_reference(x.numpy()), rtol=1e-5, atol=1e-5)


@tilejit.kernel
def elected(C, group: T.constexpr = 128):
    """TileLang's T.shuffle_elect(group): one thread of each group of `group` threads
    (lane 0 of the group's first warp; 0: thread 0 of the block) counts itself."""
    with T.Kernel(2, threads=256) as bx:
        if T.shuffle_elect(group):
            T.atomic_add(C[bx, T.get_thread_binding() // 32], 1)


@pytest.mark.parametrize("group, warps", [(0, [0]), (32, list(range(8))), (128, [0, 4]),
                                          (256, [0])])
def test_shuffle_elect_elects_one_thread_per_group(group, warps, ptxas):
    c = np.zeros((2, 8), np.int32)
    elected(c, group=group)
    want = np.zeros((2, 8), np.int32)
    want[:, warps] = 1
    np.testing.assert_array_equal(c, want)
    ptxas(elected.compile(c, group=group, target="cuda", arch="sm_90a").ptx, "sm_90a")


def test_shuffle_elect_takes_a_group_of_whole_warps():
    with pytest.raises(tilejit.CompileError, match="0 or a multiple of 32, got 48"):
        @tilejit.kernel
        def odd(C):
            with T.Kernel(1, threads=64):
                if T.shuffle_elect(48):
                    C[0] = 1


@pytest.mark.gpu
@pytest.mark.parametrize("group", [0, 32, 128, 256])
def test_shuffle_elect_on_the_gpu(group):
    c = torch.zeros(2, 8, dtype=torch.int32, device="cuda")
    elected(c, group=group)
    sim = np.zeros((2, 8), np.int32)
    elected(sim, group=group)
    np.testing.assert_array_equal(c.cpu().numpy(), sim)


def _pair_sum(val, mask):
    """A plain helper passing the shuffle's mask by keyword (the Birkhoff projection's)."""
    val += T.shfl_xor(val, 1, mask=mask)
    return val


@tilejit.kernel
def pair_sums_in_a_helper(X, O):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        O[tx] = _pair_sum(X[tx], 0xFFFFFFFF)


def test_shuffle_keywords_in_a_helper_the_kernel_inlines(ptxas):
    x = np.arange(32, dtype=np.float32)
    o = np.zeros(32, np.float32)
    pair_sums_in_a_helper(x, o)
    np.testing.assert_array_equal(o, np.repeat(x.reshape(16, 2).sum(1), 2))
    ptx = pair_sums_in_a_helper.compile(x, o, target="cuda", arch="sm_80").ptx
    assert "shfl.sync.bfly" in ptx
    ptxas(ptx, "sm_80")


@pytest.mark.gpu
def test_shuffle_keywords_in_a_helper_on_the_gpu():
    x = torch.randn(32)
    o = torch.zeros(32, device="cuda")
    pair_sums_in_a_helper(x.cuda(), o)
    sim = np.zeros(32, np.float32)
    pair_sums_in_a_helper(x.numpy(), sim)
    np.testing.assert_array_equal(o.cpu().numpy(), sim)


@tilejit.kernel
def shuffle_of_two_iterations_per_thread(X, O):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(64):
            O[i] = T.shfl_xor(X[i], 1)


def test_a_shuffle_in_a_loop_of_more_iterations_than_threads_is_reported():
    """Which lanes meet depends on how the compiler spreads 64 iterations over 32 threads:
    the simulator does not guess (it had given every iteration lane 0's result)."""
    with pytest.raises(ThreadCodeError, match="not one per thread"):
        shuffle_of_two_iterations_per_thread(np.zeros(64, np.float32),
                                             np.zeros(64, np.float32))


@tilejit.kernel
def shuffle_in_a_loop_run_one_iteration_at_a_time(X, O):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            v = X[i]
            for _ in T.serial(4):
                if v > 10.0:
                    T.loop_break()       # (a break: the simulator runs the iterations in turn)
                v += T.shfl_xor(v, 1)
            O[i] = v


def test_a_shuffle_in_a_loop_the_simulator_runs_one_iteration_at_a_time_is_reported():
    """Each iteration runs alone there, with no other iteration's value to exchange: an
    error, not the wrong answer it gave."""
    with pytest.raises(ThreadCodeError, match="one iteration at a time"):
        shuffle_in_a_loop_run_one_iteration_at_a_time(np.zeros(32, np.float32),
                                                      np.zeros(32, np.float32))

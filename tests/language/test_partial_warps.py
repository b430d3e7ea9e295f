"""A block of any thread count in [1, 1024], as TileLang and CUDA allow: ``threads=1``
for scalar code, and counts that are not a multiple of 32, whose last warp is partial.
A reduction across threads exchanges values only among the lanes the warp has (the
shuffle's member mask), as a program's shuffle does; what needs whole warps (T.gemm, the
warp reductions) says so when it compiles, in simulation too. In simulation, PTX
assembled by ptxas, and with ``-m gpu`` on the device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.sim.threads import ThreadCodeError


@tilejit.kernel
def scalar(A):
    with T.Kernel(1, threads=1) as _:
        A[0] = T.ceildiv(A[1], 32)
        A[2] = A[0] + A[1]


@tilejit.kernel
def row_max(A, B, threads: T.constexpr = 16):
    with T.Kernel(1, threads=threads) as _:
        f = T.alloc_fragment((8, 16), "float32")
        r = T.alloc_fragment((8,), "float32")
        T.copy(A, f)
        T.reduce_max(f, r, dim=1)
        T.copy(r, B)


@tilejit.kernel
def lane_sum(A, B):
    with T.Kernel(1, threads=16) as _:
        tx = T.get_thread_binding()
        B[tx] = T.warp_reduce_sum(A[tx])


@tilejit.kernel
def small_gemm(A, B, C):
    with T.Kernel(1, threads=16) as _:
        a = T.alloc_shared((16, 16), "float16")
        b = T.alloc_shared((16, 16), "float16")
        c = T.alloc_fragment((16, 16), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        T.gemm(a, b, c)
        T.copy(c, C)


THREADS = [1, 16, 48, 100]


def test_one_thread():
    a = np.array([0, 100, 0], np.int32)
    scalar(a)
    np.testing.assert_array_equal(a, [4, 100, 104])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_one_thread_ptx(arch, ptxas):
    ptx = scalar.compile(np.zeros(3, np.int32), target="cuda", arch=arch).ptx
    assert ".maxntid 1" in ptx
    ptxas(ptx, arch)


@pytest.mark.parametrize("threads", THREADS)
def test_a_reduction_over_a_partial_warp(threads):
    x = np.random.default_rng(threads).standard_normal((8, 16)).astype(np.float32)
    y = np.zeros(8, np.float32)
    row_max(x, y, threads)
    np.testing.assert_array_equal(y, x.max(1))


@pytest.mark.parametrize("threads", THREADS)
def test_the_shuffles_name_only_the_lanes_the_warp_has(threads, ptxas):
    """16 threads: the mask is the 16 lanes (65535); 48 and 100: a mask chosen per warp
    (the last one partial), so no constant mask in the shuffles."""
    x, y = np.zeros((8, 16), np.float32), np.zeros(8, np.float32)
    ptx = row_max.compile(x, y, threads, target="cuda", arch="sm_90a").ptx
    shuffles = [line for line in ptx.splitlines() if "shfl.sync" in line]
    masks = {line.split(",")[-1].strip(" ;") for line in shuffles}
    if threads == 16:
        assert shuffles and masks == {"65535"}
    elif threads > 32:
        assert shuffles and not any(m.isdigit() for m in masks)
    assert "-1;" not in " ".join(shuffles)          # never the full mask
    ptxas(ptx, "sm_90a")


@tilejit.kernel
def partial_shuffles(A, B, threads: T.constexpr = 16, width: T.constexpr = 16):
    with T.Kernel(1, threads=threads) as _:
        tx = T.get_thread_binding()
        B[tx] = T.shfl_xor(A[tx], 1, width) + T.shfl_down(A[tx], 2, width) * 100


def _partial_expected(a, width):
    lane = np.arange(a.shape[0])
    seg = lane // width * width
    down = np.where(lane % width + 2 < width, lane + 2, lane)
    return a[seg + (lane % width ^ 1)] + a[down] * 100


@pytest.mark.parametrize("threads, width", [(16, 16), (16, 8), (48, 16), (2, 2), (100, 4)])
def test_a_shuffle_among_the_lanes_a_partial_warp_has(threads, width, ptxas):
    """TileLang's Hadamard transform shuffles in blocks of 2 to 16 threads: a shuffle
    whose lanes are all there runs, its mask cut to the lanes the warp has."""
    a = np.arange(threads, dtype=np.float32)
    b = np.zeros(threads, np.float32)
    partial_shuffles(a, b, threads, width)
    np.testing.assert_array_equal(b, _partial_expected(a, width))
    ptx = partial_shuffles.compile(a, b, threads, width, target="cuda", arch="sm_90a").ptx
    shuffles = [line for line in ptx.splitlines() if "shfl.sync" in line]
    assert shuffles and "-1;" not in " ".join(shuffles)     # never the full mask
    ptxas(ptx, "sm_90a")


def test_a_shuffle_reading_a_lane_the_warp_lacks_is_reported():
    a = np.zeros(16, np.float32)
    # (shfl_xor(1) stays among lanes 0-15; shfl_down(2) of lane 14 reads lane 16)
    with pytest.raises(ThreadCodeError, match=r"T.shfl_down: lane 14 of warp 0 reads lane "
                                              r"16, which the block of 16 threads does "
                                              r"not have"):
        partial_shuffles(a, a.copy(), 16, 32)
    with pytest.raises(ThreadCodeError, match=r"lane 14 of warp 1 reads lane 16, which "
                                              r"the block of 48"):
        partial_shuffles(np.zeros(48, np.float32), np.zeros(48, np.float32), 48, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("threads, width", [(16, 16), (48, 16), (2, 2), (100, 4)])
def test_partial_warp_shuffles_on_the_gpu(threads, width):
    # whole numbers: the GPU fuses x + y * 100 into one fma, the simulator rounds twice;
    # with these both are exact, so the lanes read are what is compared
    a = torch.randint(-1000, 1000, (threads,)).float()
    b = torch.zeros(threads)
    partial_shuffles(a.cuda(), got := b.cuda(), threads, width)
    sim = b.clone()
    tilejit.kernel(partial_shuffles.func, target="sim")(a, sim, threads, width)
    assert torch.equal(got.cpu(), sim)
    torch.testing.assert_close(sim, torch.from_numpy(_partial_expected(a.numpy(), width)))


def test_what_needs_whole_warps_says_so():
    a = np.zeros(16, np.float32)
    with pytest.raises(tilejit.CompileError, match=r"T.warp_reduce_sum needs whole warps "
                                                   r".* 16 threads"):
        lane_sum(a, a.copy())                       # in simulation too
    h = np.zeros((16, 16), np.float16)
    with pytest.raises(tilejit.CompileError, match=r"T.gemm needs whole warps, the block "
                                                   r"has 16 threads"):
        small_gemm.compile(h, h, np.zeros((16, 16), np.float32), target="cuda",
                           arch="sm_80")


def test_counts_outside_1_to_1024_are_an_error():
    for bad in (0, 1025):
        with pytest.raises(ValueError, match=r"T.Kernel threads: expected a count in "
                                             r"\[1, 1024\], got " + str(bad)):
            T.launch_shape((1,), bad)


@tilejit.kernel
def one_block(A):
    """``T.Kernel`` with no grid extent: one block, as in TileLang."""
    with T.Kernel(threads=48):
        for i in T.Parallel(48):
            A[i] = A[i] * 2 + i


def test_no_grid_extent_is_one_block():
    a = np.arange(48, dtype=np.float32)
    one_block(a)
    np.testing.assert_array_equal(a, np.arange(48) * 3)
    assert T.launch_shape((), 32) == ((1,), 32)
    with pytest.raises(ValueError, match="T.Kernel takes 1 to 3 grid extents, got 4"):
        T.launch_shape((1, 1, 1, 1), 32)


@pytest.mark.gpu
def test_no_grid_extent_on_the_gpu():
    a = torch.arange(48, dtype=torch.float32)
    g = a.cuda()
    one_block(g)
    torch.cuda.synchronize()
    one_block(a)
    assert torch.equal(g.cpu(), a) and torch.equal(a, torch.arange(48.0) * 3)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", THREADS)
def test_on_the_gpu(threads):
    x = torch.randn(8, 16)
    y = torch.zeros(8, device="cuda")
    row_max(x.cuda(), y, threads)
    torch.cuda.synchronize()
    sim = torch.zeros(8)
    row_max(x, sim, threads)
    assert torch.equal(y.cpu(), sim) and torch.equal(sim, x.max(1).values)
    a = torch.tensor([0, 100, 0], dtype=torch.int32)
    g = a.cuda()
    scalar(g)
    scalar(a)
    assert torch.equal(g.cpu(), a)


@tilejit.kernel
def shuffle_forms(A, B, form: T.constexpr = "branch", width: T.constexpr = 32):
    """A shuffle reaching past a 48-thread block in four forms: lanes of warp 1 that do not
    run it (a branch holding warp 0), a T.Parallel of one iteration per thread, one with
    a loop_layout, and a value every lane holds."""
    with T.Kernel(1, threads=48):
        if form == "branch":
            tx = T.get_thread_binding()
            if tx < 32:
                B[tx, 0] = T.shfl_xor(A[tx, 0], 16, width)
        elif form == "parallel":
            for i in T.Parallel(48):
                B[i, 0] = T.shfl_xor(A[i, 0], 16, width)
        elif form == "layout":
            for i, j in T.Parallel(48, 4, loop_layout=ROWS):
                B[i, j] = T.shfl_xor(A[i, j], 16, width)
        else:
            B[0, 0] = T.shfl_down(A[0, 0], 20, width)


ROWS = T.Fragment((48, 4), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)


@pytest.mark.parametrize("form", ["parallel", "layout", "uniform"])
def test_every_form_of_a_read_past_the_block_is_reported(form):
    a = np.arange(192, dtype=np.float32).reshape(48, 4)
    with pytest.raises(ThreadCodeError, match=r"reads lane (16|20), which the block of 48 "
                                              r"threads does not have"):
        shuffle_forms(a, np.zeros_like(a), form, 32)
    b = np.zeros_like(a)
    shuffle_forms(a, b, form, 16)               # a width of 16 stays in the block
    if form != "uniform":
        np.testing.assert_array_equal(b[:, 0], a[:, 0])    # xor 16 within 16: itself


def test_lanes_that_do_not_run_the_shuffle_are_not_checked():
    a = np.arange(192, dtype=np.float32).reshape(48, 4)
    b = np.zeros_like(a)
    shuffle_forms(a, b, "branch", 32)           # warp 1 (lanes 32-47) skips it
    np.testing.assert_array_equal(b[:32, 0], a[np.arange(32) ^ 16, 0])
    assert not b[32:].any()

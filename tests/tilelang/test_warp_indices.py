"""TileLang's ``T.get_lane_idx``, ``T.get_warp_idx``, ``T.get_warp_idx_sync`` and
``T.get_warp_group_idx`` (the block's linear thread index split by the warp size, the
target's or the one given) and ``T.index_to_coordinates`` (a flat row-major index as
coordinates), written as a TileLang user writes them."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


def thread_indices(threads=256, warp_size=None, warps_per_group=None):
    @T.prim_func
    def main(lane: T.Tensor((threads,), "int32"), warp: T.Tensor((threads,), "int32"),
             warp_sync: T.Tensor((threads,), "int32"), group: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            lane[tx] = T.get_lane_idx(warp_size)
            warp[tx] = T.get_warp_idx(warp_size)
            warp_sync[tx] = T.get_warp_idx_sync(warp_size=warp_size)
            group[tx] = T.get_warp_group_idx(warp_size, warps_per_group)
    return main


def _expected(threads, warp_size, warps_per_group):
    t = np.arange(threads)
    ws = warp_size or 32
    return t % ws, t // ws, t // ws, t // (ws * (warps_per_group or 4))


def _run(threads, warp_size, warps_per_group, device="cpu"):
    kernel = tilejit.compile(thread_indices(threads, warp_size, warps_per_group))
    outs = [torch.full((threads,), -1, dtype=torch.int32, device=device) for _ in range(4)]
    kernel(*outs)
    return [o.cpu().numpy() for o in outs]


@pytest.mark.parametrize("threads,warp_size,warps_per_group",
                         [(256, None, None), (128, 16, None), (384, 32, 2), (96, 8, 3)])
def test_the_warp_indices_in_simulation(threads, warp_size, warps_per_group):
    got = _run(threads, warp_size, warps_per_group)
    for g, want in zip(got, _expected(threads, warp_size, warps_per_group)):
        np.testing.assert_array_equal(g, want)


def test_the_indices_in_a_two_dimensional_block_are_of_the_linear_thread():
    @T.prim_func
    def main(lane: T.Tensor((8, 16), "int32"), warp: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=(16, 8)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            lane[ty, tx] = T.get_lane_idx()
            warp[ty, tx] = T.get_warp_idx()
    lane, warp = torch.zeros(8, 16, dtype=torch.int32), torch.zeros(8, 16, dtype=torch.int32)
    tilejit.compile(main)(lane, warp)
    t = np.arange(128).reshape(8, 16)
    np.testing.assert_array_equal(lane.numpy(), t % 32)
    np.testing.assert_array_equal(warp.numpy(), t // 32)


def test_a_wrong_argument_is_a_compile_error():
    @T.prim_func
    def main(out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as _:
            out[T.get_thread_binding()] = T.get_lane_idx(32, 4)
    with pytest.raises(tilejit.CompileError, match=r"T.get_lane_idx\(warp_size\) takes at most"):
        tilejit.compile(main)(torch.zeros(32, dtype=torch.int32))


SHAPE = (4, 8, 16)


def unflatten(held_shape=False):
    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor(SHAPE, "float32")):
        with T.Kernel(4, threads=128) as bx:
            for t in T.Parallel(128):
                idx = bx * 128 + t
                if held_shape:
                    i, j, k = T.index_to_coordinates(idx, SHAPE)
                else:
                    i, j, k = T.index_to_coordinates(idx, (4, 8, 16))
                B[i, j, k] = A[idx]
    return main


@pytest.mark.parametrize("held_shape", [False, True])
def test_index_to_coordinates_in_simulation(held_shape):
    a = torch.randn(512)
    b = torch.zeros(SHAPE)
    tilejit.compile(unflatten(held_shape))(a, b)
    torch.testing.assert_close(b, a.reshape(SHAPE), rtol=0, atol=0)


def test_index_to_coordinates_on_the_host_is_tilelangs():
    assert T.index_to_coordinates(77, (4, 8, 16)) == [0, 4, 13]
    assert T.index_to_coordinates(5, [6]) == [5]


def test_index_to_coordinates_needs_a_known_shape():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=64) as _:
            for t in T.Parallel(64):
                i, j = T.index_to_coordinates(t, B.shape)
                B[i, j] = A[t]
    with pytest.raises(tilejit.CompileError, match="T.index_to_coordinates"):
        tilejit.compile(main)(torch.zeros(64), torch.zeros(8, 8))


def test_the_ptx_assembles(ptxas):
    kernel = tilejit.compile(thread_indices(256, None, None))
    ptx = kernel.get_kernel_source(arch="sm_90a")
    assert "%tid.x" in ptx
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)
        ptxas(tilejit.compile(unflatten()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("threads,warp_size,warps_per_group", [(256, None, None), (384, 32, 2)])
def test_gpu_matches_numpy_and_the_simulator(threads, warp_size, warps_per_group):
    gpu = _run(threads, warp_size, warps_per_group, "cuda")
    sim = _run(threads, warp_size, warps_per_group)
    for g, s, want in zip(gpu, sim, _expected(threads, warp_size, warps_per_group)):
        np.testing.assert_array_equal(g, want)
        np.testing.assert_array_equal(s, want)
    a = torch.randn(512, device="cuda")
    b = torch.zeros(SHAPE, device="cuda")
    tilejit.compile(unflatten())(a, b)
    torch.testing.assert_close(b, a.reshape(SHAPE), rtol=0, atol=0)


class _Config:
    warp_size = 16


config = _Config()
shadowed = None


def lane_with(kind):
    """A kernel writing each thread's lane (or warp group) with the warp size ``kind``
    names (one kernel per kind: the front end reads every branch of a kernel)."""
    if kind == "typo":
        @T.prim_func
        def main(out: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                out[T.get_thread_binding()] = T.get_lane_idx(config.wrap_size)
    elif kind == "shadowed":
        @T.prim_func
        def main(out: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                shadowed = 16
                out[T.get_thread_binding()] = T.get_lane_idx(shadowed)
    elif kind == "attribute":
        @T.prim_func
        def main(out: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                out[T.get_thread_binding()] = T.get_lane_idx(config.warp_size)
    else:
        @T.prim_func
        def main(out: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                out[T.get_thread_binding()] = T.get_warp_group_idx(warps_per_group=1)
    return main


def test_a_warp_size_is_none_only_where_the_program_holds_none():
    for kind in ("shadowed", "attribute"):
        out = torch.zeros(64, dtype=torch.int32)
        tilejit.compile(lane_with(kind))(out)
        np.testing.assert_array_equal(out.numpy(), np.arange(64) % 16)
    with pytest.raises(tilejit.CompileError, match="no attribute 'wrap_size'"):
        tilejit.compile(lane_with("typo"))(torch.zeros(64, dtype=torch.int32))


def test_warps_per_group_needs_the_warp_size():
    with pytest.raises(ValueError, match="warps_per_group needs warp_size"):
        tilejit.compile(lane_with("group"))(torch.zeros(64, dtype=torch.int32))


def thread_in_parallel(extents, fragment=False):
    """The thread index read in a T.Parallel: with as many iterations as threads and no
    fragment in the body, iteration k runs on thread k (the GPU's schedule,
    codegen/lowering/parallel.py), as an image-metrics kernel's tile load assumes."""
    @T.prim_func
    def main(out: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "int32")
            for i, j in T.Parallel(*extents):
                if fragment:
                    f[i * extents[1] + j] = 1
                out[i * extents[1] + j] = T.get_warp_idx() * 100 + T.get_lane_idx()
    return main


def test_the_thread_index_in_a_parallel_loop_of_one_iteration_per_thread():
    out = torch.full((128,), -1, dtype=torch.int32)
    tilejit.compile(thread_in_parallel((2, 32)))(out)
    k = np.arange(64)
    np.testing.assert_array_equal(out[:64].numpy(), k // 32 * 100 + k % 32)


def test_the_thread_index_in_other_parallel_loops_is_not_simulated():
    for extents, fragment in (((4, 32), False), ((2, 32), True)):
        with pytest.raises(RuntimeError, match="read inside a T.Parallel loop"):
            tilejit.compile(thread_in_parallel(extents, fragment))(
                torch.zeros(128, dtype=torch.int32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_thread_index_in_a_parallel_loop_assembles(arch, ptxas):
    ptx = tilejit.compile(thread_in_parallel((2, 32))).get_kernel_source(arch=arch)
    assert "%tid.x" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_the_thread_index_in_a_parallel_loop_on_the_gpu():
    out = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    tilejit.compile(thread_in_parallel((2, 32)))(out)
    sim = torch.full((128,), -1, dtype=torch.int32)
    tilejit.compile(thread_in_parallel((2, 32)))(sim)
    assert torch.equal(out.cpu(), sim)


def test_index_to_coordinates_by_keyword():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            for t in T.Parallel(32):
                i, j = T.index_to_coordinates(shape=(4, 8), index=t)
                B[i, j] = A[t]
    a, b = torch.randn(32), torch.zeros(4, 8)
    tilejit.compile(main)(a, b)
    torch.testing.assert_close(b, a.reshape(4, 8), rtol=0, atol=0)

"""TVM's vector expressions as TileLang's programs index with them: ``B[i, T.Ramp(j *
lanes, 1, lanes)] = A[i, T.Ramp(j * lanes, 1, lanes)]`` (TileLang's parallel-loop test
stores vectors so), ``T.Broadcast(value, lanes)``: the statement once per lane
(frontend/ramp_vectors.py)."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def vector_store(rows=8, cols=128, lanes=2, dtype="int8"):
    @T.prim_func
    def main(A: T.Tensor((rows, cols * lanes), dtype), B: T.Tensor((rows, cols * lanes), dtype)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(rows, cols):
                B[i, T.Ramp(j * lanes, 1, lanes)] = A[i, T.Ramp(j * lanes, 1, lanes)]
    return main


def strided_scale(n=64, lanes=4):
    """Y[4k + l] = X[l * n + k] * s + l: a stride-n gather per lane and a broadcast."""
    @T.prim_func
    def main(X: T.Tensor((lanes * n,), "float32"), S: T.Tensor((1,), "float32"),
             Y: T.Tensor((lanes * n,), "float32")):
        with T.Kernel(1, threads=64):
            for k in T.Parallel(n):
                Y[T.Ramp(k * lanes, 1, lanes)] = X[T.Ramp(k, n, lanes)] * T.Broadcast(
                    S[0], lanes) + T.Ramp(0, 1, lanes)
    return main


@pytest.mark.parametrize("lanes, dtype", [(2, "int8"), (4, "float16")])
def test_a_vector_store_copies_every_lane(lanes, dtype):
    kernel = tilelang.compile(vector_store(lanes=lanes, dtype=dtype), out_idx=[1], target="sim")
    data = torch.randint(-8, 8, (8, 128 * lanes)).to(T.dtype(dtype).as_torch())
    torch.testing.assert_close(kernel(data), data)


def test_ramps_of_any_stride_and_a_broadcast():
    x = torch.randn(256)
    s = torch.tensor([1.5])
    y = torch.zeros(256)
    tilelang.compile(strided_scale(), target="sim")(x, s, y)
    want = (x.reshape(4, 64).T * 1.5 + torch.arange(4.0)).reshape(256)
    torch.testing.assert_close(y, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    kernel = tilelang.compile(vector_store(), out_idx=[1])
    ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_lanes_of_two_counts_in_one_statement_are_an_error():
    @T.prim_func
    def mixed(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            B[T.Ramp(0, 1, 4)] = A[T.Ramp(0, 2, 2)]
    with pytest.raises(tilejit.CompileError, match="different lane counts"):
        tilelang.compile(mixed, target="sim")(torch.zeros(8), torch.zeros(8))


def test_outside_a_kernel_they_are_arrays():
    np.testing.assert_array_equal(T.Ramp(3, 2, 4), [3, 5, 7, 9])
    np.testing.assert_array_equal(T.Broadcast(1.5, 3), [1.5, 1.5, 1.5])


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    data = torch.randint(-8, 8, (8, 256), device="cuda", dtype=torch.int8)
    out = tilelang.compile(vector_store(), out_idx=[1])(data)
    torch.testing.assert_close(out, data)
    x = torch.randn(256, device="cuda")
    s = torch.tensor([1.5], device="cuda")
    y = torch.zeros(256, device="cuda")
    tilelang.compile(strided_scale())(x, s, y)
    sim = torch.zeros(256)
    tilelang.compile(strided_scale(), target="sim")(x.cpu(), s.cpu(), sim)
    torch.testing.assert_close(y.cpu(), sim)
    torch.testing.assert_close(y.cpu(), (x.cpu().reshape(4, 64).T * 1.5
                                          + torch.arange(4.0)).reshape(256))


def broadcast_into_a_slice(dtype, lanes=32):
    """TileLang's issue-2480 form: ``packed[0:LANES] = T.Broadcast(src[0], LANES)``."""
    @T.prim_func
    def main(src: T.Tensor((1,), dtype), out: T.Tensor((lanes,), dtype)):
        with T.Kernel(1, threads=1) as _:
            packed = T.alloc_local((lanes,), dtype)
            packed[0:lanes] = T.Broadcast(src[0], lanes)
            for i in T.serial(lanes):
                out[i] = packed[i]
    return main


@pytest.mark.parametrize("dtype, value", [("int8", -37), ("uint8", 213)])
def test_a_broadcast_into_a_slice_sets_each_lane(dtype, value):
    src = torch.tensor([value]).to(T.dtype(dtype).as_torch())
    out = torch.zeros(32, dtype=src.dtype)
    tilelang.compile(broadcast_into_a_slice(dtype), target="sim")(src, out)
    torch.testing.assert_close(out, torch.full_like(out, value), rtol=0, atol=0)


def ramp_from_the_end():
    """TileLang's issue-2554 form: a Ramp whose lanes are negative only at run time count
    from the tensor's end (``A[T.Ramp(t - 2, 1, 4)]`` at t = 0: A[-2], A[-1], A[0], A[1])."""
    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=1) as _:
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]
    return main


def test_a_ramps_negative_lanes_count_from_the_end():
    b = tilelang.compile(ramp_from_the_end(), out_idx=[1], target="sim")(
        torch.arange(1024, dtype=torch.float32))
    want = torch.tensor([[(t - 2 + k) % 1024 for k in range(4)] for t in range(4)],
                        dtype=torch.float32)
    torch.testing.assert_close(b, want)


@pytest.mark.gpu
def test_a_ramp_from_the_end_on_the_gpu():
    a = torch.arange(1024, dtype=torch.float32, device="cuda")
    b = tilelang.compile(ramp_from_the_end(), out_idx=[1])(a)
    want = torch.tensor([[(t - 2 + k) % 1024 for k in range(4)] for t in range(4)],
                        dtype=torch.float32)
    torch.testing.assert_close(b.cpu(), want)


def shift_in_place():
    """A vector statement reading the buffer it writes loads every lane first: shared
    ``s[1:5] = s[0:4]`` by Ramps, and a tensor's ``A[2:6] += A[1:5]``."""
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            s = T.alloc_shared((8,), "float32")
            for i in T.serial(8):
                s[i] = A[i]
            s[T.Ramp(1, 1, 4)] = s[T.Ramp(0, 1, 4)]
            A[T.Ramp(2, 1, 4)] += A[T.Ramp(1, 1, 4)]
            for i in T.serial(8):
                B[i] = s[i]
    return main


def test_a_vector_statement_loads_every_lane_before_it_stores():
    a, b = torch.arange(8.0), torch.zeros(8)
    tilelang.compile(shift_in_place(), target="sim")(a, b)
    torch.testing.assert_close(b, torch.tensor([0., 0, 1, 2, 3, 5, 6, 7]))
    torch.testing.assert_close(a, torch.tensor([0., 1, 3, 5, 7, 9, 6, 7]))


def test_a_slice_of_another_extent_than_the_lanes_is_an_error():
    @T.prim_func
    def bad(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            A[0:8] = T.Broadcast(3.0, 4)
    with pytest.raises(tilejit.CompileError, match="a slice of 8 element.* 4 lanes"):
        tilelang.compile(bad, target="sim")(torch.zeros(8))

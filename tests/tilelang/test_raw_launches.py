"""Kernels launched as TVM's TIR writes it, with no ``with T.Kernel(...)``: a nest of
``for bx in T.thread_binding(n, thread="blockIdx.x")`` loops or ``T.launch_thread``
statements (``frontend/raw_launches.py``), and ``T.launch_thread`` inside a T.Kernel.
Checked against torch in the simulator, assembled by ptxas for sm_80 and sm_90a, and run
on the device by the ``gpu`` twin beside the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def scale_loops(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        for bx in T.thread_binding(T.ceildiv(N, block), thread="blockIdx.x"):
            for tx in T.thread_binding(block, thread="threadIdx.x"):
                if bx * block + tx < N:
                    B[bx * block + tx] = A[bx * block + tx] * 2.0 + 1.0
    return main


def add_launched(M, N, width=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        by = T.launch_thread("blockIdx.y", M)
        bx = T.launch_thread("blockIdx.x", N // width)
        tx = T.launch_thread("threadIdx.x", width)
        B[by, bx * width + tx] = A[by, bx * width + tx] + T.float16(1)
    return main


def transpose_2d_block(M, N, bm=8, bn=32):
    """A block of (bn, bm) threads along x and y; block indices along x and y."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
        for by in T.thread_binding(T.ceildiv(M, bm), thread="blockIdx.y"):
            for bx in T.thread_binding(T.ceildiv(N, bn), thread="blockIdx.x"):
                for ty in T.thread_binding(bm, thread="threadIdx.y"):
                    for tx in T.thread_binding(bn, thread="threadIdx.x"):
                        i = by * bm + ty
                        j = bx * bn + tx
                        if i < M and j < N:
                            B[j, i] = A[i, j]
    return main


@tilelang.jit
def unit_launch(A: T.Tensor((16, 16), dtype=T.float32)):
    for _blockIdx in T.thread_binding(1, thread="blockIdx.x"):
        for _threadIdx in T.thread_binding(128, thread="threadIdx.x"):
            for i in T.unroll(0, 16, step=4):
                if _threadIdx == 0:
                    A[0, i] = 1.0


@T.prim_func
def launch_thread_in_kernel(A: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        tx = T.launch_thread("threadIdx.x", 128)
        A[bx * 128 + tx] = T.float32(tx) + T.float32(bx) * 1000.0


def _expect_launch_thread(n=256):
    i = np.arange(n)
    return (i % 128 + (i // 128) * 1000.0).astype(np.float32)


def test_a_loop_nest_launch_runs_with_its_tail():
    n = 1000
    a = torch.randn(n)
    b = torch.zeros(n)
    tilelang.compile(scale_loops(n), target="sim")(a, b)
    torch.testing.assert_close(b, a * 2 + 1)


def test_launch_thread_statements_open_a_kernel():
    a = torch.randn(4, 64).half()
    b = torch.zeros(4, 64).half()
    tilelang.compile(add_launched(4, 64), target="sim")(a, b)
    torch.testing.assert_close(b, (a.double() + 1).half())


def test_a_two_dimensional_block_and_grid():
    a = torch.randn(50, 70)
    b = torch.zeros(70, 50)
    tilelang.compile(transpose_2d_block(50, 70), target="sim")(a, b)
    assert torch.equal(b, a.T)


def test_tilelangs_unroll_kernel_runs():
    a = torch.zeros(16, 16)
    unit_launch(a)
    expect = torch.zeros(16, 16)
    expect[0, 0:16:4] = 1.0
    assert torch.equal(a, expect)


def test_launch_thread_inside_a_kernel_is_the_thread_index():
    a = torch.zeros(256)
    tilelang.compile(launch_thread_in_kernel, target="sim")(a)
    np.testing.assert_array_equal(a.numpy(), _expect_launch_thread())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_raw_launches_assemble(arch, ptxas):
    for func, axes in ((scale_loops(1000), ("%ctaid.x", "%tid.x")),
                       (add_launched(4, 64), ("%ctaid.y", "%ctaid.x", "%tid.x")),
                       (transpose_2d_block(50, 70), ("%ctaid.y", "%ctaid.x", "%tid.x")),
                       (launch_thread_in_kernel, ("%ctaid.x", "%tid.x"))):
        ptx = tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()
        for axis in axes:
            assert axis in ptx, (axis, func)
        ptxas(ptx, arch)


def test_mismatched_extents_are_errors():
    @T.prim_func
    def twice(A: T.Tensor((64,), "float32")):
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                A[tx] = 1.0
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                A[tx] = 2.0
    with pytest.raises(tilejit.CompileError, match=r"threadIdx.x is bound with extent 32 "
                       r"here and 64 at line \d+"):
        tilelang.compile(twice, target="sim")

    @T.prim_func
    def two_launches(A: T.Tensor((64,), "float32")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            A[tx] = 1.0
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            A[tx] = A[63 - tx]
    with pytest.raises(tilejit.CompileError, match=r"has one launch, the loop nest at line "
                       r"\d+: this statement after it would be another"):
        tilelang.compile(two_launches, target="sim")

    @T.prim_func
    def nested(A: T.Tensor((64,), "float32")):
        for _i in T.serial(2):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"at the top level of the function; this "
                       r"one is nested"):
        tilelang.compile(nested, target="sim")

    @T.prim_func
    def too_many(A: T.Tensor((64,), "float32")):
        for ty in T.thread_binding(64, thread="threadIdx.y"):
            for _tx in T.thread_binding(32, thread="threadIdx.x"):
                A[ty] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"the launch's block has 2048 threads "
                       r"\(32 × 64, the threadIdx extents bound\); a block has 1 to 1024"):
        tilelang.compile(too_many, target="sim")

    @T.prim_func
    def wrong_threads(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.launch_thread("threadIdx.x", 32)
            A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"launch_thread\(\"threadIdx.x\", 32\): "
                       r"the kernel's block has 64 along x"):
        tilelang.compile(wrong_threads, target="sim")

    half = 32

    @T.prim_func
    def wrong_threads_by_name(A: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            tx = T.launch_thread("threadIdx.x", half)
            A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"block has 64 along x"):
        tilelang.compile(wrong_threads_by_name, target="sim")

    @T.prim_func
    def wrong_blocks(A: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            b = T.launch_thread("blockIdx.x", 8)
            A[b] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"grid has 4 along x"):
        tilelang.compile(wrong_blocks, target="sim")

    @T.prim_func
    def bad_axis(A: T.Tensor((64,), "float32")):
        tx = T.launch_thread("vthread", 64)
        A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"the axis is a string.*got 'vthread'"):
        tilelang.compile(bad_axis, target="sim")

    @T.prim_func
    def one_argument(A: T.Tensor((64,), "float32")):
        tx = T.launch_thread("threadIdx.x")
        A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"T.launch_thread\(thread, extent\)"):
        tilelang.compile(one_argument, target="sim")


@pytest.mark.gpu
def test_raw_launches_on_the_gpu():
    n = 100_000
    a = torch.randn(n, device="cuda")
    b = torch.zeros(n, device="cuda")
    tilelang.compile(scale_loops(n))(a, b)
    torch.testing.assert_close(b, (a.double() * 2 + 1).float())
    sim = torch.zeros(n)
    tilelang.compile(scale_loops(n), target="sim")(a.cpu(), sim)
    assert torch.equal(b.cpu(), sim)

    h = torch.randn(64, 256, device="cuda").half()
    out = torch.zeros_like(h)
    tilelang.compile(add_launched(64, 256))(h, out)
    torch.testing.assert_close(out, (h.double() + 1).half())

    m = torch.randn(300, 170, device="cuda")
    t = torch.zeros(170, 300, device="cuda")
    tilelang.compile(transpose_2d_block(300, 170))(m, t)
    assert torch.equal(t, m.T)

    u = torch.zeros(16, 16, device="cuda")
    unit_launch(u)
    assert u[0, 0:16:4].eq(1).all() and u.sum().item() == 4

    x = torch.zeros(256, device="cuda")
    tilelang.compile(launch_thread_in_kernel)(x)
    np.testing.assert_array_equal(x.cpu().numpy(), _expect_launch_thread())


@T.macro
def fill_rows(A, value):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            A[bx, tx] = value + bx


def test_a_macro_holding_the_launch():
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32")):
        fill_rows(A, 1.0)
    a = torch.zeros(4, 64)
    tilelang.compile(main, target="sim")(a)
    assert torch.equal(a, (torch.arange(4.0) + 1)[:, None].expand(4, 64))
    ptx = tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()
    assert "%ctaid.x" in ptx and "%tid.x" in ptx


# -- found by review: extents the pass builds are checked, extents read no launch name,
# -- a macro may open with `bx = T.thread_binding(...)`, helpers holding bindings inline
def test_an_offset_binding_and_the_default_block_are_checked():
    @T.prim_func
    def offset(A: T.Tensor((128,), "float32")):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for tx in T.thread_binding(64, 128, thread="threadIdx.x"):     # extent 64
                A[bx * 64 + tx - 64] = 1.0
            for tx in T.thread_binding(64, thread="threadIdx.x"):          # extent 64
                A[bx * 64 + tx] = A[bx * 64 + tx] + 1.0
    a = np.zeros(128, np.float32)
    tilelang.compile(offset, target="sim")(a)
    np.testing.assert_array_equal(a, np.full(128, 2.0, np.float32))

    @T.prim_func
    def default_block(A: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:                                            # 128 threads
            tx = T.launch_thread("threadIdx.x", 64)
            T.atomic_add(A[0], 1)
    with pytest.raises(tilejit.CompileError, match=r"block has 128 along x"):
        tilelang.compile(default_block, target="sim")

    shape = (32, 4)

    @T.prim_func
    def named_tuple(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=shape) as bx:
            ty = T.launch_thread("threadIdx.y", 8)
            A[ty] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"block has 4 along y"):
        tilelang.compile(named_tuple, target="sim")

    @T.prim_func
    def tall(A: T.Tensor((64,), "float32")):
        for _ty in T.thread_binding(2048, thread="threadIdx.y"):
            A[0] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"block has 2048 threads"):
        tilelang.compile(tall, target="sim")


def test_bad_extents_and_forms_are_errors_at_the_binding():
    @T.prim_func
    def inner_extent(A: T.Tensor((64,), "float32")):
        bx = T.launch_thread("blockIdx.x", 2)
        tx = T.launch_thread("threadIdx.x", bx * 32)    # EXTENT-READS-BX
        A[tx] = 2.0
    with pytest.raises(tilejit.CompileError, match=r"the extent of threadIdx.x, `bx \* 32`, "
                       r"reads bx, which the launch itself binds") as e:
        tilelang.compile(inner_extent, target="sim")
    assert "EXTENT-READS-BX" in str(e.value)

    @T.prim_func
    def negative(A: T.Tensor((64,), "float32")):
        for _ty in T.thread_binding(-2, thread="threadIdx.y"):
            for _tx in T.thread_binding(-16, thread="threadIdx.x"):
                A[0] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"threadIdx.(x|y) is bound with extent "
                       r"-(2|16): an extent of a launch is at least 1"):
        tilelang.compile(negative, target="sim")
    with pytest.raises(ValueError, match=r"each block extent is at least 1"):
        T.launch_shape((1,), (-16, -2))

    @T.prim_func
    def two_in_one(A: T.Tensor((64,), "float32")):
        bx, tx = T.launch_thread("blockIdx.x", 1), T.launch_thread("threadIdx.x", 64)
        A[tx] = 1.0
    with pytest.raises(tilejit.CompileError, match=r"one binding per statement"):
        tilelang.compile(two_in_one, target="sim")


@T.macro
def _opens_with_bindings(A):
    bx = T.thread_binding(0, 2, thread="blockIdx.x")
    tx = T.thread_binding(64, thread="threadIdx.x")
    A[bx * 64 + tx] = T.float32(tx + bx)


@T.macro
def _binds_the_threads(A, bx):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        A[bx * 64 + tx] = T.float32(tx * 2 + bx)


def test_macros_that_open_or_hold_the_bindings(ptxas):
    @T.prim_func
    def opens(A: T.Tensor((128,), "float32")):
        _opens_with_bindings(A)

    @T.prim_func
    def holds(A: T.Tensor((128,), "float32")):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            _binds_the_threads(A, bx)
    tx, bx = np.arange(64, dtype=np.float32), np.repeat([0, 1], 64).astype(np.float32)
    a = np.zeros(128, np.float32)
    tilelang.compile(opens, target="sim")(a)
    np.testing.assert_array_equal(a, np.tile(tx, 2) + bx)
    tilelang.compile(holds, target="sim")(a)
    np.testing.assert_array_equal(a, np.tile(tx, 2) * 2 + bx)
    for arch in ("sm_80", "sm_90a"):
        for f in (opens, holds):
            ptx = tilelang.compile(f, target=f"cuda -arch={arch}").get_kernel_source()
            assert ".maxntid 64\n" in ptx and "%ctaid.x" in ptx and "%tid.x" in ptx
            ptxas(ptx, arch)

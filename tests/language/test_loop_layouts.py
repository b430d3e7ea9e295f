"""``T.Parallel(..., loop_layout=T.Fragment(...))``: the program says which thread runs
each iteration and at which local index. A warp shuffle in the body then exchanges the
iterations the layout puts on neighbouring lanes at the same local index, the thread
index read there is the layout's thread, and the fragments the loop indexes take its
layout (passes/loop_layouts.py). The simulator runs the iterations on the same threads
(sim/runtime.py, sim/warp.py)."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.threads import ThreadCodeError

torch = pytest.importorskip("torch")

# each thread runs one row of 4 (thread i, local index j)
ROWS = T.Fragment((32, 4), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)
# 4 rows of 32 lanes over a warp each: row i on warp i, column l on lane l
WARP_ROWS = T.Fragment((4, 32), forward_thread_fn=lambda i, l: i * 32 + l,
                       forward_index_fn=lambda i, l: 0)
# the transpose: column l of 4 on thread l * 4 + i (lanes of a row 4 apart)
STRIDED = T.Fragment((4, 32), forward_thread_fn=lambda i, l: l % 8 * 4 + i + l // 8 * 32,
                     forward_index_fn=lambda i, l: 0)


def neighbour_rows(dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((32, 4), dtype), B: T.Tensor((32, 4), dtype)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(32, 4, loop_layout=ROWS):
                B[i, j] = T.shfl_xor(A[i, j], 1)
    return main


def row_sums(layout, threads=128):
    """Y[i] = sum over l of A[i, l * 8: l * 8 + 8], a partial per (i, l) in a fragment,
    then a butterfly over the lanes of each row (as the layout places them)."""
    @T.prim_func
    def main(A: T.Tensor((4, 256), "float32"), Y: T.Tensor((4, 32), "float32")):
        with T.Kernel(1, threads=threads):
            part = T.alloc_fragment((4, 32), "float32")
            for i, l in T.Parallel(4, 32, loop_layout=layout):
                part[i, l] = 0.0
                for k in T.serial(8):
                    part[i, l] += A[i, l * 8 + k]
            for i, l in T.Parallel(4, 32, loop_layout=layout):
                v = part[i, l]
                v = v + T.shfl_xor(v, 16)
                v = v + T.shfl_xor(v, 8)
                v = v + T.shfl_xor(v, 4)
                v = v + T.shfl_xor(v, 2)
                v = v + T.shfl_xor(v, 1)
                Y[i, l] = v
    return main


def who_runs(layout):
    @T.prim_func
    def main(B: T.Tensor((4, 32), "int32")):
        with T.Kernel(1, threads=128):
            for i, l in T.Parallel(4, 32, loop_layout=layout):
                B[i, l] = T.get_thread_binding() * 100 + T.warp_reduce_sum(l)
    return main


def sim(func):
    return tilelang.compile(func, target="sim")


def _butterfly_rows(a, layout):
    """What the GPU's xor butterfly over lanes gives each (i, l) under ``layout``."""
    part = a.reshape(4, 32, 8).sum(2)
    thread = layout.thread_table()[..., 0]
    by_thread = {int(thread[i, l]): part[i, l] for i in range(4) for l in range(32)}
    out = np.zeros((4, 32))
    for i in range(4):
        for l in range(32):
            t = int(thread[i, l])
            out[i, l] = sum(by_thread[t - t % 32 + m] for m in range(32))
    return out


def test_a_shuffle_reads_the_iteration_its_layout_puts_on_the_neighbouring_lane():
    a = torch.arange(128, dtype=torch.float32).reshape(32, 4)
    b = torch.zeros_like(a)
    sim(neighbour_rows())(a, b)
    torch.testing.assert_close(b, a[torch.arange(32) ^ 1])


@pytest.mark.parametrize("layout", [WARP_ROWS, STRIDED], ids=["warp_rows", "strided"])
def test_fragments_take_the_loops_layout_and_the_butterfly_follows_it(layout):
    a = torch.rand(4, 256, dtype=torch.float32)
    y = torch.zeros(4, 32)
    sim(row_sums(layout))(a, y)
    np.testing.assert_allclose(y.numpy(), _butterfly_rows(a.double().numpy(), layout),
                               rtol=1e-5)
    if layout is WARP_ROWS:         # a row per warp: every lane holds its row's sum
        torch.testing.assert_close(y, a.sum(1, keepdim=True).expand(4, 32),
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("layout", [WARP_ROWS, STRIDED], ids=["warp_rows", "strided"])
def test_the_thread_index_in_the_loop_is_the_layouts(layout):
    b = torch.zeros(4, 32, dtype=torch.int32)
    sim(who_runs(layout))(b)
    # warp_reduce_sum(l): the sum of l over the iterations on the 32 lanes of the warp
    torch.testing.assert_close(b.long(), _who_runs_expected(layout))


def _who_runs_expected(layout):
    thread = torch.from_numpy(layout.thread_table()[..., 0])
    lanes = torch.arange(32).expand(4, 32)
    sums = torch.zeros(4, 32, dtype=torch.int64)
    for w in range(4):
        on = thread // 32 == w
        sums[on] = lanes[on].sum()
    return thread * 100 + sums


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_runs_each_row_on_its_thread(arch, ptxas):
    compiled = tilejit.kernel(_rows_kernel).compile(
        np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32), target="cuda",
        arch=arch)
    ptx = compiled.ptx
    loads = [ln for ln in ptx.splitlines() if "ld.global" in ln]
    # a thread's four elements are one row: 4 consecutive floats from one address
    assert len(loads) == 4 and sum("+4]" in ln or "+8]" in ln or "+12]" in ln
                                   for ln in loads) == 3, loads
    assert sum("shfl.sync.bfly" in ln for ln in ptx.splitlines()) == 4
    ptxas(ptx, arch)


def _rows_kernel(A, B):
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(32, 4, loop_layout=ROWS):
            B[i, j] = T.shfl_xor(A[i, j], 1)


def test_a_layout_that_leaves_a_lane_without_an_iteration_is_reported():
    # rows on even threads only: thread 1 runs nothing, and the shuffle reads it
    evens = T.Fragment((16, 4), forward_thread_fn=lambda i, j: 2 * i,
                       forward_index_fn=lambda i, j: j)

    @tilejit.kernel
    def reads_an_idle_lane(A, B):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(16, 4, loop_layout=evens):
                B[i, j] = T.shfl_xor(A[i, j], 1)

    with pytest.raises(ThreadCodeError, match="gives that lane no iteration"):
        reads_an_idle_lane(np.zeros((16, 4), np.float32), np.zeros((16, 4), np.float32))


def _compile(body_layout, extents=(32, 4), threads=32):
    @tilejit.kernel
    def k(A, B):
        with T.Kernel(1, threads=threads):
            for i, j in T.Parallel(*extents, loop_layout=body_layout):
                B[i, j] = A[i, j]
    return k


@pytest.mark.parametrize("value, message", [
    (T.Fragment((32, 8), forward_thread_fn=lambda i, j: i), r"shape \[32, 8\], expected the "
                                                            r"loop's extents \[32, 4\]"),
    (T.Layout((32, 4), lambda i, j: i * 4 + j), "expected a T.Fragment"),
    (T.Fragment((32, 4), forward_thread_fn=lambda i, j: i + 32), "thread out of range"),
    (T.Fragment((32, 4), forward_thread_fn=lambda i, j: 0, forward_index_fn=lambda i, j: 0),
     "local index"),
])
def test_a_wrong_layout_is_a_clear_error_at_the_loop(value, message):
    k = _compile(value)
    with pytest.raises(CompileError, match=message) as e:
        k(np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32))
    assert "loop_layout" in str(e.value) or "T.Fragment" in str(e.value)


def test_a_gemm_accumulator_with_another_layout_names_both():
    rows = T.Fragment((16, 16), forward_thread_fn=lambda i, j: i * 2 + j // 8,
                      forward_index_fn=lambda i, j: j % 8)

    @tilejit.kernel
    def k(A, B, C):
        with T.Kernel(1, threads=32):
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            for i, j in T.Parallel(16, 16, loop_layout=rows):
                C[i, j] = c[i, j]

    with pytest.raises(CompileError, match="loop_layout") as e:
        k(np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16),
          np.zeros((16, 16), np.float32))
    assert "accumulator" in str(e.value)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    a = torch.randn(32, 4, device="cuda")
    b = torch.zeros_like(a)
    tilelang.compile(neighbour_rows())(a, b)
    torch.testing.assert_close(b, a[torch.arange(32, device="cuda") ^ 1])
    for layout in (WARP_ROWS, STRIDED):
        x = torch.rand(4, 256, device="cuda")
        y = torch.zeros(4, 32, device="cuda")
        tilelang.compile(row_sums(layout))(x, y)
        np.testing.assert_allclose(y.cpu().numpy(),
                                   _butterfly_rows(x.cpu().double().numpy(), layout), rtol=1e-5)
        y_sim = torch.zeros(4, 32)
        sim(row_sums(layout))(x.cpu(), y_sim)
        np.testing.assert_allclose(y.cpu().numpy(), y_sim.numpy(), rtol=1e-6)
        w = torch.zeros(4, 32, dtype=torch.int32, device="cuda")
        tilelang.compile(who_runs(layout))(w)
        torch.testing.assert_close(w.cpu().long(), _who_runs_expected(layout))


def test_a_loop_layout_writing_a_fragment_it_does_not_own_is_a_layout_conflict():
    """TileLang's layout-inference test: a replicated loop layout writing a fragment whose
    own annotated layout puts its elements on other threads is "Layout infer conflict"."""
    def loop_fn(i, j, rep):
        return i * 4 + rep % 4 + (rep // 4) * 32, j

    def buffer_fn(i, j, rep):
        return i * 4 + j + rep * 32, 0

    loop_layout = T.Fragment((8, 4), forward_fn=loop_fn, replicate=8)
    buffer_layout = T.Fragment((8, 4), forward_fn=buffer_fn, replicate=2)

    @T.prim_func
    def main(Out: T.Tensor((8, 4), "float32")):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((8, 4), T.float32)
            T.annotate_layout({frag: buffer_layout})
            for i, j in T.Parallel(8, 4, loop_layout=loop_layout):
                frag[i, j] = T.float32(1.0)
            T.copy(frag, Out)

    with pytest.raises(CompileError, match="Layout infer conflict"):
        tilelang.compile(main, target="sim")(torch.zeros(8, 4))

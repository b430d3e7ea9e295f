"""``T.loop_break()``: TileLang's ``break`` of the innermost loop, written by the front end
as Python's ``break``. In simulation against a Python reference, in PTX (assembled for
sm_80 and sm_90a) and, with ``-m gpu``, on the device against the reference and the
simulator; outside a loop, or with arguments, a ``CompileError`` at its line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

ROWS, COLS = 8, 64


@T.prim_func
def first_negative(A: T.Tensor((ROWS, COLS), T.float32), idx: T.Tensor((ROWS,), T.int32)):
    with T.Kernel(ROWS, threads=32) as bx:
        tx = T.get_thread_binding()
        if tx == 0:
            idx[bx] = -1
            for j in T.serial(COLS):
                if A[bx, j] < 0:
                    idx[bx] = j
                    T.loop_break()


def _inputs():
    a = np.random.default_rng(0).random((ROWS, COLS)).astype(np.float32)
    a[3, 10], a[3, 20], a[5, 0], a[7, 63] = -1, -2, -1, -3
    return a


def _reference(a):
    return np.array([next((j for j in range(COLS) if a[r, j] < 0), -1) for r in range(ROWS)],
                    np.int32)


def test_loop_break_leaves_the_loop_in_the_simulator_and_assembles(ptxas):
    kernel = tilejit.compile(first_negative)
    a = _inputs()
    idx = np.zeros(ROWS, np.int32)
    kernel(a, idx)
    np.testing.assert_array_equal(idx, _reference(a))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@T.prim_func
def outside_a_loop(A: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=32) as bx:
        A[bx] = 1
        T.loop_break()


def test_loop_break_outside_a_loop_is_a_compile_error():
    with pytest.raises(CompileError, match="write it inside a loop") as e:
        tilejit.compile(outside_a_loop)(np.zeros(8, np.float32))
    assert "T.loop_break()" in str(e.value)


@pytest.mark.gpu
def test_gpu_loop_break_matches_the_reference_and_simulator():
    import torch
    a = _inputs()
    idx = torch.zeros(ROWS, dtype=torch.int32, device="cuda")
    tilejit.compile(first_negative)(torch.tensor(a, device="cuda"), idx)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(idx.cpu().numpy(), _reference(a))
    sim = np.zeros(ROWS, np.int32)
    tilejit.compile(first_negative, target="sim")(a, sim)
    np.testing.assert_array_equal(idx.cpu().numpy(), sim)


@T.prim_func
def in_parallel(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            if A[i] < 0:
                T.loop_break()
            B[i] = 2 * A[i]


@T.prim_func
def plain_break_in_parallel(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            if A[i] < 0:
                break
            B[i] = 2 * A[i]


@pytest.mark.parametrize("func, what", [(in_parallel, "T.loop_break()"),
                                        (plain_break_in_parallel, "break")])
def test_a_break_out_of_a_parallel_loop_is_a_compile_error(func, what):
    """The simulator would stop the loop, each GPU thread only its own iteration."""
    with pytest.raises(CompileError, match="in a T.Parallel loop") as e:
        tilejit.compile(func)(np.zeros(128, np.float32), np.zeros(128, np.float32))
    assert what in str(e.value)

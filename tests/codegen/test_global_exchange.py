"""Threads of a block that exchange values through a tensor across their own
``T.sync_threads()``: the tensors of such a kernel are not ``noalias``. With it, LLVM
took the tensor's memory for each thread's own: it loaded ``A[tx + 1]`` once before the
loop and kept only the last step's store (found by review, 2026-12-04). Checked in the
PTX (a load and a store per step), in the simulator and, with ``-m gpu``, on the device
against both."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T

STEPS = 4


@tilejit.kernel
def neighbours(A, B):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for s in T.serial(STEPS):
            A[tx] = s * 1000 + tx
            T.sync_threads()
            if tx < 127:
                B[s * 128 + tx] = A[tx + 1]
            T.sync_threads()


@T.macro
def publish(A, tx, s):
    A[tx] = s * 1000 + tx
    T.sync_threads()


@tilejit.kernel
def neighbours_through_a_macro(A, B):
    """The same, the store and the barrier in a macro (inlined into the kernel)."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for s in T.serial(STEPS):
            publish(A, tx, s)
            if tx < 127:
                B[s * 128 + tx] = A[tx + 1]
            T.sync_threads()


@tilejit.kernel
def warp_neighbours(A, B):
    """The same within one warp, across T.sync_warp()."""
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        for s in T.serial(STEPS):
            A[tx] = s * 1000 + tx
            T.sync_warp()
            if tx < 31:
                B[s * 32 + tx] = A[tx + 1]
            T.sync_warp()


def count_below(p):
    """A plain helper holding a predicate barrier (compiled as a device function)."""
    return T.syncthreads_count(p)


@tilejit.kernel
def neighbours_through_a_helper(A, B):
    """The same, the barriers a helper's (the kernel itself names none)."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for s in T.serial(STEPS):
            A[tx] = s * 1000 + tx
            n = count_below(tx < 64)
            if tx < 127:
                B[s * 128 + tx] = A[tx + 1] + n - 64
            count_below(tx < 1)


def _expected():
    return np.array([s * 1000 + tx + 1 if tx < 127 else 0 for s in range(STEPS)
                     for tx in range(128)], np.float32)


@pytest.mark.parametrize("kernel", [neighbours, neighbours_through_a_macro, warp_neighbours,
                                    neighbours_through_a_helper])
def test_each_step_stores_and_reloads_in_the_ptx(ptxas, kernel):
    a, b = np.zeros(129, np.float32), np.zeros(STEPS * 128, np.float32)
    ptx = kernel.compile(a, b, target="cuda", arch="sm_90a").ptx
    body = ptx[ptx.index(".entry"):]
    assert body.count("ld.global") >= STEPS and "ld.global.nc" not in body
    assert body.count("st.global") >= 2 * STEPS
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("kernel", [neighbours, neighbours_through_a_macro,
                                    neighbours_through_a_helper])
def test_the_simulator_exchanges_each_step(kernel):
    a, b = np.zeros(129, np.float32), np.zeros(STEPS * 128, np.float32)
    tilejit.kernel(kernel.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, _expected())


def _warp_expected():
    return np.array([s * 1000 + tx + 1 if tx < 31 else 0 for s in range(STEPS)
                     for tx in range(32)], np.float32)


def test_the_simulator_exchanges_each_step_within_a_warp():
    a, b = np.zeros(33, np.float32), np.zeros(STEPS * 32, np.float32)
    tilejit.kernel(warp_neighbours.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, _warp_expected())


@pytest.mark.gpu
def test_gpu_exchanges_each_step_within_a_warp():
    import torch
    a, b = torch.zeros(33, device="cuda"), torch.zeros(STEPS * 32, device="cuda")
    warp_neighbours(a, b)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(b.cpu().numpy(), _warp_expected())


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [neighbours, neighbours_through_a_macro,
                                    neighbours_through_a_helper])
def test_gpu_exchanges_each_step_as_the_simulator(kernel):
    import torch
    a, b = torch.zeros(129, device="cuda"), torch.zeros(STEPS * 128, device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(b.cpu().numpy(), _expected())

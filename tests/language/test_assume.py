"""``T.assume(cond)``, TileLang's fact for the compiler: ``llvm.assume`` on the GPU (a
false one is undefined behaviour there), checked by the simulator (an AssertionError at
the kernel's line) and, with ``debug=True``, on the GPU as ``T.device_assert``. In
simulation, PTX assembled by ptxas, and with ``-m gpu`` on the device."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def shifted_copy(A, B, lo, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        T.assume(N % 4 == 0)
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N - lo:
                T.assume(j + lo >= 0)
                B[j] = A[j + lo]


def test_true_assumptions_run():
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    shifted_copy(a, b, 3)
    np.testing.assert_array_equal(b[:253], a[3:])


def test_a_false_assumption_is_reported_at_its_line():
    a = np.arange(258, dtype=np.float32)             # N % 4 == 2: found on the host
    with pytest.raises(AssertionError, match=r"Assume: N % 4 == 0 does not hold for these "
                                             r"arguments \(T.assume at line \d+\)"):
        shifted_copy(a, np.zeros_like(a), 3)
    a = np.arange(256, dtype=np.float32)             # j depends on the thread: simulated
    with pytest.raises(AssertionError, match=r"(?s)T.assume: the condition is false here .*"
                                             r"undefined behaviour.*T.assume\(j \+ lo >= 0\)"):
        shifted_copy(a, np.zeros_like(a), -1)        # j = 0 reads A[-1]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros(256, np.float32)
    ptx = shifted_copy.compile(a, a.copy(), 3, target="cuda", arch=arch).ptx
    assert "trap" not in ptx                         # a hint, not a check
    ptxas(ptx, arch)
    debug = tilejit.kernel(shifted_copy.func, debug=True)
    checked = debug.compile(a, a.copy(), 3, target="cuda", arch=arch).ptx
    assert "trap" in checked and "vprintf" in checked
    ptxas(checked, arch)


@pytest.mark.gpu
def test_on_the_gpu():
    a = torch.arange(256, dtype=torch.float32)
    b = torch.zeros(256, device="cuda")
    shifted_copy(a.cuda(), b, 3)
    torch.cuda.synchronize()
    sim = torch.zeros(256)
    shifted_copy(a, sim, 3)
    assert torch.equal(b.cpu(), sim)
    bad = torch.ones(8, 62, device="cuda")
    with pytest.raises(RuntimeError, match="Assume: N % 4 == 0"):
        first_rows(bad, torch.zeros_like(bad), 4)


@tilejit.kernel
def first_rows(A, B, rows):
    M, N = A.shape
    with T.Kernel(1, threads=128) as bx:
        T.assume(N % 4 == 0 and rows <= M)      # of the arguments only: checked on the host
        for i, j in T.Parallel(4, 128):
            if i < rows and j < N:
                B[i, j] = A[i, j]


def test_an_assumption_of_the_arguments_is_checked_on_the_host_first():
    """TileLang checks such an assumption at each launch and raises a RuntimeError; the
    AssumptionError is one (and an AssertionError), raised before anything runs."""
    a = np.ones((8, 64), np.float32)
    b = np.zeros((8, 64), np.float32)
    first_rows(a, b, 4)
    assert b[:4].all() and not b[4:].any()
    for bad in ((np.ones((8, 62), np.float32), 4), (a, 9)):
        with pytest.raises(RuntimeError, match=r"Assume: N % 4 == 0 and rows <= M does not "
                                               r"hold for these arguments") as info:
            first_rows(bad[0], np.zeros_like(bad[0]), bad[1])
        assert isinstance(info.value, tilejit.AssumptionError)
        assert isinstance(info.value, AssertionError)

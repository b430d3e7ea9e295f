"""A branch on the thread index holding per-thread code (``if tx < 128:`` and element
stores) gets no barrier inside from the compiler: the threads that skip it would never
reach one (``passes/barriers.py``). Its statements are one step for the simulator's race
check (``threads.region``): an element one thread writes and another reads or writes
anywhere in the branch is a RaceError, though the simulator's lanes, which run each
statement for all threads before the next, would compute the exchange as intended. A
named barrier or ``T.sync_warp()`` inside orders the threads it holds."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.races import RaceError


def _line(text, path=__file__):
    return next(n for n, src in enumerate(open(path), 1) if text in src)


@tilejit.kernel
def exchange(A, B, form: T.constexpr):
    with T.Kernel(1, threads=256) as bx:
        S = T.alloc_shared((256,), A.dtype)
        tx = T.get_thread_binding()
        if form == 0:
            if tx < 128:
                S[tx] = A[tx]
                B[tx] = S[127 - tx]             # another warp's element: a race
        elif form == 1:
            if tx < 128:
                S[tx] = A[tx]
                B[tx] = S[tx] * 2               # its own element
        elif form == 2:
            if tx < 128:
                S[tx] = A[tx]
            if tx < 128:
                B[tx] = S[127 - tx]             # after the branch: the compiler's barrier
        elif form == 3:
            if tx < 128:
                S[tx] = A[tx]
                T.sync_threads(1, 128)          # the branch's threads' named barrier
                B[tx] = S[127 - tx]
        elif form == 4:
            if tx < 32:
                S[tx] = A[tx]
                T.sync_warp()
                B[tx] = S[31 - tx]              # within the warp, after __syncwarp
        elif form == 5:
            if tx < 128:
                S[tx] = A[tx]
            else:
                B[tx] = S[tx - 128]             # the other branch's threads: a race
        elif form == 6:
            for k in T.serial(tx % 2 + 1):      # a trip count per thread
                S[tx] = A[tx] + k
                B[tx] = S[tx ^ 1]               # the neighbour's element: a race
        else:
            if tx < 256:                        # every thread takes it: still no barrier
                S[tx] = A[tx]
                B[tx] = S[255 - tx]             # a race


def _run(form, size=256):
    a = np.arange(size, dtype=np.float32)
    b = np.zeros_like(a)
    exchange(a, b, form)
    return a, b


@pytest.mark.parametrize("form, line", [
    (0, "another warp's element"), (5, "the other branch's threads"),
    (6, "the neighbour's element"), (7, "B[tx] = S[255 - tx]")])
def test_an_exchange_inside_a_thread_branch_races(form, line):
    with pytest.raises(RaceError, match=r"race on shared tile S\[\d+\]: a thread (reads|"
                                        r"writes) it and it is (written|read) by another "
                                        r"thread in the same branch on the thread index") \
            as info:
        _run(form)
    assert f"line {_line(line)}" in str(info.value)
    assert "write in the branch and read after it" in str(info.value)


def test_a_branch_on_its_own_elements_and_a_read_after_it():
    a, b = _run(1)
    np.testing.assert_array_equal(b[:128], a[:128] * 2)
    a, b = _run(2)
    np.testing.assert_array_equal(b[:128], a[:128][::-1])


def test_barriers_of_the_branchs_threads_order_it():
    a, b = _run(3)
    np.testing.assert_array_equal(b[:128], a[:128][::-1])
    a, b = _run(4)
    np.testing.assert_array_equal(b[:32], a[:32][::-1])


def test_the_compiler_puts_its_barrier_after_the_branch_not_inside(ptxas):
    a = np.zeros(256, np.float32)
    inside = exchange.compile(a, a, 0, target="cuda", arch="sm_90a").ptx
    after = exchange.compile(a, a, 2, target="cuda", arch="sm_90a").ptx
    assert "bar.sync" not in inside[inside.index("st.shared"):]
    assert "bar.sync" in after[after.index("st.shared"):after.index("ld.shared")]
    ptxas(after, "sm_90a")


@pytest.mark.gpu
def test_the_race_free_forms_on_the_gpu():
    import torch
    a = torch.arange(256, dtype=torch.float32)
    for form, n in ((1, 128), (2, 128), (3, 128), (4, 32)):
        b = torch.zeros(256).cuda()
        exchange(a.cuda(), b, form)
        torch.cuda.synchronize()
        sim = torch.zeros(256)
        exchange(a, sim, form)
        assert torch.equal(b.cpu()[:n], sim[:n]), form

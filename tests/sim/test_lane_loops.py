"""Per-thread loops that threads leave at different times, run lane-wise by the simulator
(``sim/lane_loops.py``): a ``while`` whose condition depends on the thread index (a
grid-stride loop), a ``continue`` or ``break`` under a branch only some threads take, in
``for`` and ``while`` loops, with per-thread trip counts, nested. Each thread's result
is what it computes by itself (a plain Python loop per thread is the reference); on the
GPU the same against the simulator. Before, each stopped the simulator with "... differs
between the block's threads: not supported in simulation"."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def leaving(A, Out, form: T.constexpr):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        acc = T.alloc_var(T.float32, init=0.0)
        if form == 0:                       # grid-stride: each thread its own elements
            pos = T.alloc_var(T.int32, init=tx)
            while pos < 200:
                Out[pos] = A[pos] * 2
                pos += 64
        elif form == 1:                     # continue where the thread's element is odd
            for i in T.serial(8):
                if (tx + i) % 2 == 1:
                    acc += 100.0
                    continue
                acc += A[tx * 3 + i]
            Out[tx] = acc
        elif form == 2:                     # break at the first element past a threshold
            found = T.alloc_var(T.int32, init=-1)
            for i in T.serial(16):
                if A[tx * 3 + i] > 0.5:
                    found = i
                    break
                acc += A[tx * 3 + i]
            Out[tx] = found * 1000.0 + acc
        elif form == 3:                     # while True with a per-thread break and continue
            k = T.alloc_var(T.int32, init=0)
            while True:
                k += 1
                if k % 3 == tx % 3:
                    continue
                acc += k
                if k >= tx % 7 + 4:
                    break
            Out[tx] = acc
        elif form == 4:                     # a per-thread trip count and a continue in it
            for i in T.serial(tx % 5 + 1):
                if i == tx % 3:
                    continue
                acc += A[i]
            Out[tx] = acc
        else:                               # the inner loop's break leaves the inner loop
            for i in T.serial(4):
                for j in T.serial(8):
                    if j > tx % 6:
                        break
                    acc += 1.0
                if i == tx % 4:
                    break
            Out[tx] = acc


def _expected(a, form):
    out = np.zeros(200, np.float32)
    if form == 0:
        return a * 2
    for tx in range(64):
        acc = 0.0
        if form == 1:
            for i in range(8):
                if (tx + i) % 2 == 1:
                    acc += 100.0
                    continue
                acc += a[tx * 3 + i]
        elif form == 2:
            found = -1
            for i in range(16):
                if a[tx * 3 + i] > 0.5:
                    found = i
                    break
                acc += a[tx * 3 + i]
            acc = found * 1000.0 + acc
        elif form == 3:
            k = 0
            while True:
                k += 1
                if k % 3 == tx % 3:
                    continue
                acc += k
                if k >= tx % 7 + 4:
                    break
        elif form == 4:
            for i in range(tx % 5 + 1):
                if i == tx % 3:
                    continue
                acc += a[i]
        else:
            for i in range(4):
                for j in range(8):
                    if j > tx % 6:
                        break
                    acc += 1.0
                if i == tx % 4:
                    break
        out[tx] = acc
    return out


@pytest.mark.parametrize("form", range(6))
def test_each_thread_leaves_its_own_loop(form, ptxas):
    a = np.random.default_rng(form).random(200, dtype=np.float32)
    out = np.zeros(200, np.float32)
    leaving(a, out, form)
    np.testing.assert_allclose(out, _expected(a, form), rtol=1e-6)
    ptxas(leaving.compile(a, out, form, target="cuda", arch="sm_90a").ptx, "sm_90a")


@pytest.mark.gpu
def test_each_thread_leaves_its_own_loop_on_the_gpu():
    import torch
    a = torch.rand(200)
    for form in range(6):
        out = torch.zeros(200).cuda()
        leaving(a.cuda(), out, form)
        torch.cuda.synchronize()
        sim = torch.zeros(200)
        leaving(a, sim, form)
        torch.testing.assert_close(out.cpu(), sim, rtol=1e-6, atol=1e-6)

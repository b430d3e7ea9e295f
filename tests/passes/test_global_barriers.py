"""Block barriers for a global tensor the kernel writes and then reads (or reads and then
overwrites) in another statement, as for a shared tile: one thread's store is another's
load across two T.Parallel loops, which the simulator runs one after the other and the
GPU ran with no barrier between them (the read could see the old value). A loop storing
other elements in turn, atomics and read-only tensors get none. Barriers checked in the
device program and the PTX here, the results on the GPU against the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T

SYNC = "__tj_sync()"


@tilejit.kernel
def reversed_through_global(A, B, C):
    """C = reverse(2 A), through B: thread t stores B[t·k] and reads B[255 - t·k]."""
    with T.Kernel(1, threads=128):
        for i in T.Parallel(256):
            B[i] = A[i] * 2.0
        for i in T.Parallel(256):
            C[i] = B[255 - i]


@tilejit.kernel
def shifted_in_place(A):
    """A[i] = A[i + 1] for i < 255 in two statements: read all, then overwrite."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((256,), T.float32)
        for i in T.Parallel(256):
            x[i] = A[(i + 1) % 256]
        for i in T.Parallel(256):
            A[i] = x[i]


@tilejit.kernel
def chunks_in_turn(X, Y, n: T.constexpr = 256):
    """Each iteration stores other elements of Y: no barrier on the back edge."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((n,), T.float32)
        for k in T.serial(X.shape[0] // n):
            T.copy(X[k * n], x)
            for i in T.Parallel(n):
                x[i] = x[i] + 1.0
            T.copy(x, Y[k * n])


@tilejit.kernel
def atomics_only(A, C):
    with T.Kernel(4, threads=128) as bx:
        for i in T.Parallel(256):
            T.atomic_add(C[i], A[bx, i])
        for i in T.Parallel(256):
            T.atomic_add(C[i], 1.0)


def _put(Y, i, v):
    Y[i] = v


@tilejit.kernel
def through_a_helper(A, B, C):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(256):
            _put(B, i, A[i] * 2.0)
        for i in T.Parallel(256):
            C[i] = B[255 - i]


@tilejit.kernel
def through_a_view(A, B, C):
    with T.Kernel(1, threads=128):
        Bv = T.reshape(B, (8, 32))
        for i, j in T.Parallel(8, 32):
            Bv[i, j] = A[i * 32 + j] * 2.0
        for i in T.Parallel(256):
            C[i] = B[255 - i]


@tilejit.kernel
def in_place_in_turn(X, Y, n: T.constexpr = 256):
    """Each iteration updates its own elements on the same thread: no barrier."""
    with T.Kernel(1, threads=128):
        for k in T.serial(X.shape[0] // n):
            for i in T.Parallel(n):
                X[k * n + i] = X[k * n + i] + Y[k * n + i]


def _program(kernel, args, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    compiled = kernel.compile(*args, target="cuda", arch="sm_90a")
    (text,) = tmp_path.glob("*/*_after_insert_barriers.py")
    return compiled.ptx, text.read_text()


def _f32(*shape):
    return np.zeros(shape, np.float32)


def test_a_store_then_another_threads_load_gets_a_barrier(tmp_path, monkeypatch):
    ptx, text = _program(reversed_through_global, (_f32(256),) * 3, tmp_path, monkeypatch)
    lines = [l.strip() for l in text.splitlines()]
    assert lines.count(SYNC) == 1, text
    k = lines.index(SYNC)
    assert "B[" in lines[k - 1] or "B[" in "".join(lines[k - 4:k]), text
    assert "C[i] = " in "".join(lines[k + 1:]), text
    assert ptx.count("bar.sync") == 1


def test_a_load_then_another_threads_store_gets_a_barrier(tmp_path, monkeypatch):
    ptx, text = _program(shifted_in_place, (_f32(256),), tmp_path, monkeypatch)
    assert text.count(SYNC) == 1 and ptx.count("bar.sync") == 1


@pytest.mark.parametrize("kernel", [through_a_helper, through_a_view])
def test_a_store_through_a_helper_or_a_view_gets_a_barrier(kernel, tmp_path, monkeypatch):
    """Found by a review: the store was not seen through a device-function helper or a
    T.reshape of the tensor."""
    ptx, text = _program(kernel, (_f32(256),) * 3, tmp_path, monkeypatch)
    assert text.count(SYNC) == 1 and ptx.count("bar.sync") == 1
    a = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    b, c = _f32(256), _f32(256)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, (a * 2.0)[::-1])


@pytest.mark.parametrize("kernel, args", [
    (chunks_in_turn, (_f32(1024), _f32(1024))),
    (atomics_only, (_f32(4, 256), _f32(256))),
    (in_place_in_turn, (_f32(1024), _f32(1024))),
])
def test_stores_in_turn_and_atomics_get_none(kernel, args, tmp_path, monkeypatch):
    ptx, text = _program(kernel, args, tmp_path, monkeypatch)
    assert SYNC not in text and "bar.sync" not in ptx


def test_in_simulation():
    a = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    b, c = _f32(256), _f32(256)
    reversed_through_global(a, b, c)
    np.testing.assert_array_equal(c, (a * 2.0)[::-1])
    x = a.copy()
    shifted_in_place(x)
    np.testing.assert_array_equal(x, np.roll(a, -1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    ptxas(reversed_through_global.compile(*(_f32(256),) * 3, target="cuda", arch=arch).ptx,
          arch)


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    a = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    b, c = torch.zeros(256, device="cuda"), torch.zeros(256, device="cuda")
    for _ in range(20):
        reversed_through_global(torch.from_numpy(a).cuda(), b, c)
        np.testing.assert_array_equal(c.cpu().numpy(), (a * 2.0)[::-1])
    for _ in range(20):
        x = torch.from_numpy(a).cuda()
        shifted_in_place(x)
        np.testing.assert_array_equal(x.cpu().numpy(), np.roll(a, -1))

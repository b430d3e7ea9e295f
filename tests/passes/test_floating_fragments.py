"""A fragment only serial code indexes (``P[i, j]`` in ``T.serial`` loops, never in a
``T.Parallel`` or a tile operation), of any size: every thread holds the whole of it and
runs that code on its own copy, as TileLang lays out its "floating" fragments (fully
replicated). A third-party M2RNN scan builds its (16, 16) transition matrices so
(passes/whole_fragments.py; the simulator's per-thread code alike, sim/semantics.py)."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.passes.registers import RegisterSpillWarning

torch = pytest.importorskip("torch")


def scan(n=16, threads=128):
    """Y[b] = P^T A[b] P with P built in serial code: P[i, j] = (i == j) + 0.5 (i == j + 1)
    scaled by the block's own factor; each thread holds all of P."""
    @T.prim_func
    def main(A: T.Tensor((4, n, n), "float32"), S: T.Tensor((4,), "float32"),
             Y: T.Tensor((4, n, n), "float32")):
        with T.Kernel(4, threads=threads) as b:
            P = T.alloc_fragment((n, n), "float32")
            for i in T.serial(n):
                for j in T.serial(n):
                    P[i, j] = T.if_then_else(i == j, S[b], T.if_then_else(i == j + 1, 0.5, 0.0))
            tx = T.get_thread_binding()
            for k in T.serial(n * n // threads):
                e = k * threads + tx
                r = e // n
                c = e % n
                acc = T.alloc_var("float32")
                acc = 0.0
                for m in T.serial(n):
                    acc += P[m, r] * A[b, m, c]
                Y[b, r, c] = acc
    return main


def _expected(a, s, n=16):
    out = np.zeros_like(a, dtype=np.float64)
    for b in range(4):
        p = np.eye(n) * s[b] + np.eye(n, k=-1) * 0.5
        out[b] = p.T @ a[b].astype(np.float64)
    return out


def test_a_large_fragment_of_serial_code_is_each_threads_own():
    a = torch.randn(4, 16, 16)
    s = torch.tensor([1.0, 2.0, -1.0, 0.5])
    y = torch.zeros(4, 16, 16)
    with pytest.warns(RegisterSpillWarning, match="only serial code indexes it"):
        tilelang.compile(scan(), target="sim")(a, s, y)
    np.testing.assert_allclose(y.numpy(), _expected(a.numpy(), s.numpy()), rtol=1e-5,
                               atol=1e-5)


def test_one_indexed_in_a_parallel_loop_too_is_still_spread():
    @T.prim_func
    def mixed(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            P = T.alloc_fragment((16, 16), "float32")
            for i, j in T.Parallel(16, 16):
                P[i, j] = A[i, j]
            for i in T.serial(16):
                B[i, 0] = P[i, 0]
    with pytest.raises(tilelang.CompileError, match="spread over the block's threads"):
        tilelang.compile(mixed, target="sim")(torch.zeros(16, 16), torch.zeros(16, 16))


@pytest.mark.gpu
def test_on_the_gpu_against_float64_and_the_simulator():
    a = torch.randn(4, 16, 16)
    s = torch.tensor([1.0, 2.0, -1.0, 0.5])
    y = torch.zeros(4, 16, 16, device="cuda")
    with pytest.warns(RegisterSpillWarning):
        tilelang.compile(scan())(a.cuda(), s.cuda(), y)
    np.testing.assert_allclose(y.cpu().numpy(), _expected(a.numpy(), s.numpy()), rtol=1e-5,
                               atol=1e-5)
    sim = torch.zeros(4, 16, 16)
    tilelang.compile(scan(), target="sim")(a, s, sim)
    np.testing.assert_allclose(y.cpu().numpy(), sim.numpy(), rtol=1e-6, atol=1e-6)

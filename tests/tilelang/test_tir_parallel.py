"""TVM's parallel loop, ``for i in T.parallel(n)``, which TileLang's programs (its
sparse-attention pooling example, its parallel tests) write beside ``T.Parallel``:
TileLang lays it out as a parallel loop, a perfect nest of them as one loop of their
extents, and so does tilejit (``frontend/tir_parallel.py``); ``T.parallel(a, b)``
starts at ``a``. In simulation against torch, in PTX through ptxas, on the GPU against
the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language import parallel


@tilejit.jit
def masked_rows(A, start: int = 8):
    M, N = T.const("M N")
    A: T.Tensor[[M, N], T.float32]
    B = T.empty([M, N], T.float32)
    C = T.empty([M], T.float32)
    with T.Kernel(1, threads=128):
        S = T.alloc_fragment((M, N), T.float32)
        T.copy(A, S)
        for i in T.parallel(M):
            for j in T.parallel(N):
                if i >= 10:
                    S[i, j] = S[i, j] * 2
        T.copy(S, B)
        for i in T.parallel(M):
            C[i] = 0.0
        for i in parallel(start, M):           # imported by name; from `start`
            C[i] = A[i, 0] + i
    return B, C


def _expected(a, start=8):
    b = a.clone()
    b[10:] *= 2
    c = torch.zeros(a.shape[0])
    c[start:] = a[start:, 0] + torch.arange(start, a.shape[0])
    return b, c


def test_a_parallel_nest_and_a_started_loop(ptxas):
    a = torch.randn(64, 32)
    b, c = masked_rows(a)
    want_b, want_c = _expected(a)
    assert torch.equal(b, want_b) and torch.equal(c, want_c)
    ptx = masked_rows.get_kernel_source(M=64, N=32, arch="sm_90a")
    assert "ld.global" in ptx and "st.global" in ptx
    ptxas(ptx, "sm_90a")


def test_a_loop_over_two_variables_is_refused():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=64):
            for i, j in T.parallel(8):
                A[i, j] = 0.0
    with pytest.raises(tilejit.CompileError, match=r"T.parallel\(stop\) or T.parallel\("
                                                   r"start, stop\) loops over one variable"):
        tilejit.compile(main, target="sim")(torch.zeros(8, 8))


@pytest.mark.gpu
def test_a_parallel_nest_on_the_gpu():
    a = torch.randn(64, 32)
    b, c = masked_rows(a.cuda())
    sim_b, sim_c = masked_rows(a)
    assert torch.equal(b.cpu(), sim_b) and torch.equal(c.cpu(), sim_c)
    want_b, want_c = _expected(a)
    assert torch.equal(sim_b, want_b) and torch.equal(sim_c, want_c)

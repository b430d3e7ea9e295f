"""Launches captured in a CUDA graph (torch.cuda.graph) replay correctly: a launch goes to
torch's current stream, so capture records it; what a capture fixes is every argument as
it was then (pointers, shapes, scalars, the TMA tensor maps encoded from them, and the
T.empty outputs allocated from the graph's pool). Replaying with new data copied into the
same buffers gives the new results."""
import pytest
import torch

import tilejit
import tilejit.language as T
from kernels import gemm


@tilejit.kernel
def add_scaled(A, B, alpha, block: T.constexpr = 1024):
    N = A.shape[0]
    C = T.empty((N,), A.dtype)
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                C[j] = A[j] + B[j] * alpha
    return C


def _capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):          # warm up: compile, load, the fast path
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


@pytest.mark.gpu
def test_a_kernel_with_an_output_replays_with_new_data():
    a, b = torch.randn(100_003, device="cuda"), torch.randn(100_003, device="cuda")
    g, c = _capture(lambda: add_scaled(a, b, 0.5))
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b * 0.5)


@pytest.mark.gpu
def test_a_tma_wgmma_gemm_replays_with_new_data():
    M = N = K = 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    cfg = dict(block_M=128, block_N=128, block_K=64, threads=128, stages=3)
    g, _ = _capture(lambda: gemm(a, b, c, **cfg))
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-3

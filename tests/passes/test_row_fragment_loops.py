"""A ``T.Parallel`` that reads a row fragment (``m[h]``) and no fragment with all its
indices, over a shared tile, as TileLang's flash-decoding example writes
``S_shared[h, k] = T.exp2(...) / logsum[h]``: the loop follows a stand-in of its shape
in which each thread holding ``m[h]`` takes every k (passes/layout_inference.py)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

H, N, K = 64, 32, 8


def scaled_rows():
    @T.prim_func
    def main(A: T.Tensor((H, N), "float16"), B: T.Tensor((H, N), "float16"),
             S: T.Tensor((H, K), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((H, N), "float16")
            B_s = T.alloc_shared((H, N), "float16")
            acc = T.alloc_fragment((H, H), "float32")
            m = T.alloc_fragment((H,), "float32")
            S_s = T.alloc_shared((H, K), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            T.reduce_max(acc, m, dim=1)
            for h, k in T.Parallel(H, K):
                S_s[h, k] = m[h] * (k + 1)
            T.copy(S_s, S)
    return main


def reference(a, b):
    return (a.double() @ b.double().T).max(dim=1).values[:, None] * torch.arange(1, K + 1)


def test_in_simulation_against_torch():
    a, b = torch.randn(H, N, dtype=torch.half), torch.randn(H, N, dtype=torch.half)
    s = torch.zeros(H, K)
    tilelang.compile(scaled_rows(), target="sim")(a, b, s)
    torch.testing.assert_close(s.double(), reference(a, b), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(scaled_rows()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    a, b = torch.randn(H, N, dtype=torch.half), torch.randn(H, N, dtype=torch.half)
    s = torch.zeros(H, K, device="cuda")
    tilelang.compile(scaled_rows())(a.cuda(), b.cuda(), s)
    sim = torch.zeros(H, K)
    tilelang.compile(scaled_rows(), target="sim")(a, b, sim)
    torch.testing.assert_close(s.cpu().double(), reference(a, b), atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(s.cpu(), sim, atol=1e-5, rtol=1e-5)

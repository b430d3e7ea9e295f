"""mma.sync accumulators whose rows one fragment follows are planned with the same warps
along their rows (``passes/warp_rows.py``): a row statistic of attention shared by a
64x64 score tile and a 64x256 output tile, which the Square policy would spread 2x2 and
1x4, stopped layout inference ("needs two different layouts"); TileLang's sparse-MLA and
MLA-decode kernels have this shape. Simulation against float64 torch, sm_80 and sm_90a
PTX assembled, a GPU twin."""
import pytest
import torch

import tilejit
import tilejit.language as T


def two_tiles_one_row_statistic(N=256):
    """O = softmax(Q K^T) V for one 64-row block, the running max scaling both tiles."""
    @T.prim_func
    def main(Q: T.Tensor((64, 64), T.float16), K: T.Tensor((64, 64), T.float16),
             V: T.Tensor((64, N), T.float16), O: T.Tensor((64, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            Q_s = T.alloc_shared((64, 64), T.float16)
            K_s = T.alloc_shared((64, 64), T.float16)
            V_s = T.alloc_shared((64, N), T.float16)
            P_s = T.alloc_shared((64, 64), T.float16)
            s = T.alloc_fragment((64, 64), T.float32)
            o = T.alloc_fragment((64, N), T.float32)
            m = T.alloc_fragment((64,), T.float32)
            total = T.alloc_fragment((64,), T.float32)
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.copy(V, V_s)
            T.clear(s)
            T.gemm(Q_s, K_s, s, transpose_B=True)
            T.reduce_max(s, m, dim=1)
            for i, j in T.Parallel(64, 64):
                s[i, j] = T.exp(s[i, j] - m[i])
            T.reduce_sum(s, total, dim=1)
            T.copy(s, P_s)
            T.clear(o)
            T.gemm(P_s, V_s, o)
            for i, j in T.Parallel(64, N):
                o[i, j] = o[i, j] / total[i] + m[i] * 0
            T.copy(o, O)
    return main


def _inputs(device="cpu", N=256):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(*shape, generator=g) / 4).to(torch.float16).to(device)
            for shape in ((64, 64), (64, 64), (64, N))]


def _reference(Q, K, V):
    s = Q.double() @ K.double().T
    return (torch.softmax(s, dim=1) @ V.double()).float()


def test_the_row_statistic_in_simulation():
    Q, K, V = _inputs()
    O = torch.zeros(64, 256)
    tilejit.compile(two_tiles_one_row_statistic(), target="sim")(Q, K, V, O)
    torch.testing.assert_close(O, _reference(Q, K, V), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_row_statistic_compiles(arch, ptxas):
    ptx = tilejit.compile(two_tiles_one_row_statistic(),
                          target=f"cuda -arch={arch}").get_kernel_source()
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_the_row_statistic_on_the_gpu():
    Q, K, V = _inputs("cuda")
    O = torch.zeros(64, 256, device="cuda")
    tilejit.compile(two_tiles_one_row_statistic(), target="cuda")(Q, K, V, O)
    torch.cuda.synchronize()
    torch.testing.assert_close(O, _reference(Q, K, V), rtol=2e-3, atol=2e-3)

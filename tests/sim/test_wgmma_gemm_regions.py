"""``T.wgmma_gemm`` (TileLang's explicit Hopper gemm, renamed ``T.gemm`` by the front
end) with stages of a stacked shared tile as operands (``Qs[0, :, :]``, a GQA kernel's):
regions in the simulator as ``T.gemm``'s are (it indexed the tile with slices, a
TypeError inside the simulator)."""
import pytest
import torch

import tilejit
import tilejit.language as T


def staged_products():
    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16"), B: T.Tensor((64, 32), "float16"),
             C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((2, 64, 32), "float16")
            Bs = T.alloc_shared((2, 64, 32), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0:64, :], As[0, :, :])
            T.copy(A[64:128, :], As[1, :, :])
            T.copy(B, Bs[1, :, :])
            for s in T.serial(2):
                T.wgmma_gemm(As[s, :, :], Bs[1, :, :], acc, transpose_B=True, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(acc, C[s * 64:(s + 1) * 64, :])
    return main


def _inputs():
    g = torch.Generator().manual_seed(7)
    return torch.randn(128, 32, generator=g).half(), torch.randn(64, 32, generator=g).half()


def test_stages_as_wgmma_gemm_operands(ptxas):
    a, b = _inputs()
    c = tilejit.compile(staged_products(), out_idx=[2], target="sim")(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-3, atol=1e-3)
    ptx = tilejit.compile(staged_products(), out_idx=[2], target="cuda -arch=sm_90a")\
        .get_kernel_source()
    assert "wgmma.mma_async" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_stages_as_wgmma_gemm_operands_on_the_gpu():
    a, b = _inputs()
    c = tilejit.compile(staged_products(), out_idx=[2])(a.cuda(), b.cuda())
    sim = tilejit.compile(staged_products(), out_idx=[2], target="sim")(a, b)
    torch.testing.assert_close(c.cpu().double(), a.double() @ b.double().T, rtol=1e-3,
                               atol=1e-3)
    torch.testing.assert_close(c.cpu(), sim, rtol=1e-4, atol=1e-4)

"""A T.copy between a global region and a tile whose extents differ runs over the
tile's, as TileLang's (ir/regions.tile_governs): an MLA decode copies a 64 x 64 region
of its latent cache into a 64 x 128 tile and reads the first 64 columns. Between two
tensors' regions it runs over the source's (TileLang's copy test of mismatched shapes,
``T.copy(A[:, :2], B[:, :3])``: passes/global_layouts.py)."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[1])
def wide_tile(M=32, N=80):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, 64), "float32")
            T.copy(A[0:M, 48:80], S)        # 32 columns named, 64 copied (past N: 0)
            T.copy(S, B)
    return main


@tilelang.jit
def short_store(M=32):
    @T.prim_func
    def main(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 48), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M, 32), "float32")
            T.copy(A[0:M, 0:32], F)
            T.copy(F, B[0:M, 24:40])        # 16 columns named, 32 written (past 48: not)
    return main


@tilelang.jit
def two_regions(M=128, N=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            T.copy(A[:, :2], B[:, :3])
    return main


def test_two_tensor_regions_copy_the_sources_extents():
    a = torch.randn(128, 128, dtype=torch.float16)
    b = torch.full((128, 128), 5.0, dtype=torch.float16)
    two_regions()(a, b)
    assert torch.equal(b[:, :2], a[:, :2]) and (b[:, 2:] == 5).all()


def _wide_expected(a):
    out = np.zeros((a.shape[0], 64), np.float32)
    out[:, :32] = a[:, 48:80]
    return out


def test_a_region_shorter_than_the_destination_tile():
    a = np.random.default_rng(0).standard_normal((32, 80)).astype(np.float32)
    b = wide_tile()(torch.from_numpy(a))
    np.testing.assert_array_equal(b.numpy(), _wide_expected(a))


def test_a_tile_stored_into_a_shorter_region():
    a = torch.randn(32, 64)
    b = torch.full((32, 48), -1.0)
    short_store()(a, b)
    want = torch.full((32, 48), -1.0)
    want[:, 24:48] = a[:, :24]
    assert torch.equal(b, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(wide_tile().get_kernel_source(arch=arch), arch)
    ptxas(short_store().get_kernel_source(arch=arch), arch)
    ptxas(two_regions().get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_numpy_and_the_simulator():
    a = torch.randn(32, 80)
    got = wide_tile()(a.cuda()).cpu()
    assert torch.equal(got, torch.from_numpy(_wide_expected(a.numpy())))
    assert torch.equal(got, wide_tile()(a))
    x = torch.randn(32, 64)
    b = torch.full((32, 48), -1.0, device="cuda")
    short_store()(x.cuda(), b)
    sim = torch.full((32, 48), -1.0)
    short_store()(x, sim)
    assert torch.equal(b.cpu(), sim)
    assert torch.equal(sim[:, 24:], x[:, :24])
    h = torch.randn(128, 128, dtype=torch.float16)
    g = torch.full((128, 128), 5.0, dtype=torch.float16, device="cuda")
    two_regions()(h.cuda(), g)
    assert torch.equal(g[:, :2].cpu(), h[:, :2]) and (g[:, 2:] == 5).all()

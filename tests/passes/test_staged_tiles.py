"""A shared tile the kernel stacks itself and uses one version at a time (``X[s, :, :]``,
or an element ``X[s, i, j]``) is allocated as stages (passes/staged_tiles.py): T.gemm and
T.copy take a version; any other use keeps the tile as written."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.tilelang.layout import make_swizzled_layout


@tilejit.kernel
def ring_gemm(A, B, C, bM: T.constexpr = 64, bN: T.constexpr = 64, bK: T.constexpr = 32,
              S: T.constexpr = 2):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
        A_s = T.alloc_shared((S, bM, bK), A.dtype)
        B_s = T.alloc_shared((S, bK, bN), B.dtype)
        C_f = T.alloc_fragment((bM, bN), T.float32)
        T.clear(C_f)
        for ko in T.serial(T.ceildiv(K, bK)):
            T.copy(A[by * bM:(by + 1) * bM, ko * bK:(ko + 1) * bK], A_s[ko % S, :, :])
            T.copy(B[ko * bK:(ko + 1) * bK, bx * bN:(bx + 1) * bN], B_s[ko % S, :, :])
            T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_f)
        T.copy(C_f, C[by * bM, bx * bN])


@tilejit.kernel
def element_use(A, B):
    with T.Kernel(1, threads=128) as bx:
        X = T.alloc_shared((2, 8, 16), A.dtype)
        for i, j in T.Parallel(8, 16):
            X[1, i, j] = A[i, j]
        for i, j in T.Parallel(8, 16):
            B[i, j] = X[1, i, j]


def _inputs(M, N, K):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half(),
            torch.empty(M, N))


def test_versions_as_gemm_and_copy_operands_in_simulation():
    a, b, c = _inputs(200, 136, 96)
    ring_gemm(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_stacked_tile_is_planned_as_stages(arch, ptxas):
    a, b, c = _inputs(256, 256, 256)
    compiled = ring_gemm.compile(a, b, c, target="cuda", arch=arch)
    # two versions of each 64x32 / 32x64 fp16 tile, as a two-stage pipeline has
    assert compiled.shared_bytes >= 2 * (64 * 32 * 2) * 2
    ptxas(compiled.ptx, arch)


def test_element_uses_are_elements_of_a_version():
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    b = np.zeros_like(a)
    element_use(a, b)
    np.testing.assert_array_equal(a, b)
    assert element_use.compile(a, b, target="cuda", arch="sm_80").shared_bytes == 2 * 8 * 16 * 4


@tilejit.kernel
def part_of_a_version(A, B):
    with T.Kernel(1, threads=128) as bx:
        X = T.alloc_shared((2, 8, 16), A.dtype)
        T.copy(A[0:4, 0:16], X[0, 0:4, :])        # a region of part of a version
        T.copy(X[0, 0:4, :], B[0:4, 0:16])


def test_other_uses_keep_the_tile_as_written():
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    b = np.zeros_like(a)
    part_of_a_version(a, b)
    np.testing.assert_array_equal(a[:4], b[:4])
    part_of_a_version.compile(a, b, target="cuda", arch="sm_80")


@pytest.mark.gpu
def test_versions_on_gpu():
    a, b, c = _inputs(200, 136, 96)
    ring_gemm(a.cuda(), b.cuda(), out := torch.empty(200, 136, device="cuda"))
    ring_gemm(a, b, c)
    torch.testing.assert_close(out.cpu(), c, rtol=1e-3, atol=1e-3)


@tilejit.kernel
def swizzled_ring(A, B, C):
    """A stacked tile annotated with its own swizzle (TileOPs' GQA kernel lays out its K/V
    ring so): each version is a gemm operand's tile, swizzled as such."""
    with T.Kernel(1, threads=256) as bx:
        As = T.alloc_shared((2, 64, 32), T.float16)
        Bs = T.alloc_shared((64, 32), T.float16)
        T.annotate_layout({As: make_swizzled_layout(As)})
        acc = T.alloc_fragment((64, 64), T.float32)
        acc2 = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, :], As[0, :, :])
        T.copy(A[64:128, :], As[1, :, :])
        T.copy(B, Bs)
        T.gemm(As[0, :, :], Bs, acc, transpose_B=True, clear_accum=True)
        T.gemm(As[1, :, :], Bs, acc2, transpose_B=True, clear_accum=True)
        T.copy(acc, C[0:64, :])
        T.copy(acc2, C[64:128, :])


def _swizzled_inputs():
    g = torch.Generator().manual_seed(5)
    return torch.randn(128, 32, generator=g).half(), torch.randn(64, 32, generator=g).half()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_stacked_tile_annotated_with_its_own_swizzle_is_staged(arch, ptxas):
    a, b = _swizzled_inputs()
    c = torch.zeros(128, 64)
    swizzled_ring(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-3, atol=1e-3)
    compiled = swizzled_ring.compile(a, b, c, target="cuda", arch=arch)
    assert compiled.shared_bytes >= 2 * 64 * 32 * 2 + 64 * 32 * 2
    ptxas(compiled.ptx, arch)


@pytest.mark.gpu
def test_a_stacked_tile_annotated_with_its_own_swizzle_on_gpu():
    a, b = _swizzled_inputs()
    out = torch.zeros(128, 64, device="cuda")
    swizzled_ring(a.cuda(), b.cuda(), out)
    sim = torch.zeros(128, 64)
    swizzled_ring(a, b, sim)
    torch.testing.assert_close(out.cpu().double(), a.double() @ b.double().T, rtol=1e-3,
                               atol=1e-3)
    torch.testing.assert_close(out.cpu(), sim, rtol=1e-4, atol=1e-4)

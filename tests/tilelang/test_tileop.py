"""TileLang's ``tilelang.tileop.base.GemmWarpPolicy``, which programs import instead of
``T.GemmWarpPolicy`` (a FlashAttention port for V100 does): the same enum; the tile
operators themselves (TVM nodes) are refused by name."""
import importlib

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.language.compat import NotSupportedError

# (the import as a TileLang program writes it, with `tilelang` swapped for `tilejit`)
GemmWarpPolicy = importlib.import_module("tilejit.tileop.base").GemmWarpPolicy


@tilejit.kernel
def row_policy_gemm(A, B, C, policy: T.constexpr = GemmWarpPolicy.FullRow):
    with T.Kernel(1, threads=128) as bx:
        As = T.alloc_shared((64, 32), T.float16)
        Bs = T.alloc_shared((32, 64), T.float16)
        Cf = T.alloc_fragment((64, 64), T.float32)
        T.copy(A, As)
        T.copy(B, Bs)
        T.clear(Cf)
        T.gemm(As, Bs, Cf, policy=policy)
        T.copy(Cf, C)


def test_the_policy_is_t_gemm_warp_policy():
    assert GemmWarpPolicy is T.GemmWarpPolicy
    assert importlib.import_module("tilejit.tileop").GemmWarpPolicy is T.GemmWarpPolicy
    assert [p.name for p in GemmWarpPolicy] == ["Square", "FullRow", "FullCol"]


def test_the_policy_has_tilelangs_numbers():
    """TileLang's enum is an IntEnum: int(policy), GemmWarpPolicy(1), the is_* tests."""
    assert [int(p) for p in GemmWarpPolicy] == [0, 1, 2]
    assert GemmWarpPolicy(1) is GemmWarpPolicy.FullRow
    assert GemmWarpPolicy("FullCol") is GemmWarpPolicy.FullCol
    assert GemmWarpPolicy.FullRow.is_full_row() and not GemmWarpPolicy.FullRow.is_square()
    assert GemmWarpPolicy.Square.is_square() and GemmWarpPolicy.FullCol.is_full_col()
    with pytest.raises(ValueError):
        GemmWarpPolicy(3)


@pytest.mark.parametrize("policy", [0, 1, 2, GemmWarpPolicy.FullCol])
def test_a_policy_given_by_its_number_runs(policy):
    g = np.random.default_rng(0)
    a = g.standard_normal((64, 32)).astype(np.float16)
    b = g.standard_normal((32, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    row_policy_gemm(a, b, c, policy)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)
    ptx_number = row_policy_gemm.compile(a, b, c, 1, target="cuda", arch="sm_80").ptx
    ptx_named = row_policy_gemm.compile(a, b, c, GemmWarpPolicy.FullRow, target="cuda",
                                             arch="sm_80").ptx
    assert ptx_number == ptx_named


def test_a_policy_number_out_of_range_is_a_compile_error():
    z = np.zeros((64, 64), np.float32)
    with pytest.raises(CompileError, match=r"T.gemm policy: expected a T.GemmWarpPolicy "
                       r"\(or its number 0, 1, 2\), got 7"):
        row_policy_gemm(np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16),
                             z, 7)


def test_a_gemm_with_the_imported_policy_runs():
    g = np.random.default_rng(0)
    a = g.standard_normal((64, 32)).astype(np.float16)
    b = g.standard_normal((32, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    row_policy_gemm(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_its_ptx_assembles(arch, ptxas):
    a = np.zeros((64, 32), np.float16)
    ptx = row_policy_gemm.compile(a, np.zeros((32, 64), np.float16),
                                  np.zeros((64, 64), np.float32), target="cuda", arch=arch).ptx
    assert "mma.sync" in ptx or "wgmma" in ptx
    ptxas(ptx, arch)


def test_the_tile_operators_are_refused_by_name():
    with pytest.raises(NotSupportedError, match=r"tilelang.tileop.*Gemm"):
        importlib.import_module("tilejit.tileop").Gemm  # noqa: B018 (reading it raises)
    with pytest.raises(NotSupportedError, match=r"tilelang.tileop.base"):
        importlib.import_module("tilejit.tileop.base").GemmInst  # noqa: B018


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, 32, generator=g).half()
    b = torch.randn(32, 64, generator=g).half()
    c = torch.zeros(64, 64, device="cuda")
    row_policy_gemm(a.cuda(), b.cuda(), c)
    sim = np.zeros((64, 64), np.float32)
    row_policy_gemm(a.numpy(), b.numpy(), sim)
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(c.cpu().numpy(), sim, rtol=1e-5, atol=1e-5)

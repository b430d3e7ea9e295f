"""Regions of fragments as the operands of T.clear, T.fill and T.copy (issue 27), as
TileLang programs write them: ``T.clear(C_local[:block_M, :block_K])``, ``T.fill(F[0:16,
:], v)``, ``T.copy(F[:, k0:k1], C[...])``, ``T.copy(A_shared[...], F[:, 0:32])``
(passes/fragment_regions.py: a loop over the whole fragment, the region selected)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def clear_fill(A, B, r0: T.constexpr = 0, r1: T.constexpr = 4, c0: T.constexpr = 48,
               value: T.constexpr = 7.0):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((32, 64), T.float32)
        T.copy(A, F)
        T.clear(F[r0:r1, :])                # the first rows
        T.fill(F[:, c0:], value)            # the last columns
        T.fill(F[20:28, 8:24], -1.0)        # an interior box
        T.fill(F[30, 4:12], 3.0)            # part of one row (a pinned dimension)
        T.copy(F, B)


def _clear_fill_reference(a, r0=0, r1=4, c0=48, value=7.0):
    want = a.astype(np.float64)
    want[r0:r1, :] = 0
    want[:, c0:] = value
    want[20:28, 8:24] = -1
    want[30, 4:12] = 3
    return want


@tilejit.kernel
def copies(A, C, D, E):
    with T.Kernel(T.ceildiv(C.shape[0], 8), threads=128) as by:
        A_shared = T.alloc_shared((16, 32), T.float32)
        F = T.alloc_fragment((16, 64), T.float32)
        T.fill(F, 1.0)
        T.copy(A[0:16, 0:32], A_shared)
        T.copy(A_shared, F[:, 0:32])            # shared → the first columns
        T.copy(A[0:16, 40:56], F[:, 40:56])     # a global region → interior columns
        T.copy(F[0:8, :], C[by * 8, 0])         # the first rows → a global corner (clipped)
        T.copy(F[:, 16:48], D)                  # a column band → a whole tensor
        T.copy(F[3, 8:40], E[by, :])            # part of a row → a row of a tensor


def _copies_reference(a, m):
    f = np.ones((16, 64))
    f[:, 0:32] = a[0:16, 0:32]
    f[:, 40:56] = a[0:16, 40:56]
    c = np.tile(f[0:8], ((m + 7) // 8, 1))[:m]
    e = np.tile(f[3, 8:40], ((m + 7) // 8, 1))
    return c, f[:, 16:48], e


@tilejit.kernel
def gemm_with_a_cleared_region(A, B, C, w: T.constexpr = 16):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 32), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.fill(C_local, 1.0)
        T.clear(C_local[:, :w])         # the accumulator's first columns start from 0
        for k in T.Pipelined(2, num_stages=1):
            T.copy(A[0, k * 32], A_shared)
            T.copy(B[k * 32, 0], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C)


def alias_matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    """TileLang's alias test: names bound to regions of a shared tile and a fragment."""

    @tilejit.kernel
    def main(A, B, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            X_shared = A_shared[:block_M, :block_K]
            X_local = C_local[:block_M, :block_K]
            T.clear(X_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                T.copy(A[by * block_M, ko * block_K], X_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared[:block_N, :block_K])
                T.gemm(X_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


alias = alias_matmul(128, 128, 64, 64, 64, 32)


def _half(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float16)


def _f64(x):
    return torch.from_numpy(np.asarray(x)).double()


# --- simulation ----------------------------------------------------------------------------


@pytest.mark.parametrize("consts", [{}, dict(r0=28, r1=32, c0=0, value=-2.5),
                                    dict(r0=10, r1=11, c0=63)])
def test_clear_and_fill_of_regions(consts):
    a = np.random.default_rng(0).random((32, 64)).astype(np.float32)
    b = np.zeros_like(a)
    clear_fill(a, b, **consts)
    np.testing.assert_array_equal(b, _clear_fill_reference(a, **consts))


@pytest.mark.parametrize("m", [16, 20])
def test_copies_between_regions_and_shared_and_global(m):
    a = np.random.default_rng(1).random((16, 64)).astype(np.float32)
    c = np.full((m, 64), -9, np.float32)
    d = np.zeros((16, 32), np.float32)
    e = np.zeros(((m + 7) // 8, 32), np.float32)
    copies(a, c, d, e)
    for got, want in zip((c, d, e), _copies_reference(a, m)):
        np.testing.assert_array_equal(got, want)


def test_an_accumulator_region_cleared_before_accumulation():
    a, b = _half((64, 64), 2), _half((64, 64), 3)
    c = np.zeros((64, 64), np.float32)
    gemm_with_a_cleared_region(a, b, c)
    want = _f64(a) @ _f64(b)
    want[:, 16:] += 1
    torch.testing.assert_close(torch.from_numpy(c).double(), want, rtol=1e-3, atol=1e-3)


def test_tilelang_alias_gemm():
    a, b = _half((128, 64), 4), _half((128, 64), 5)
    c = np.zeros((128, 128), np.float16)
    alias(a, b, c)
    torch.testing.assert_close(torch.from_numpy(c).double(), _f64(a) @ _f64(b).T,
                               rtol=1e-2, atol=1e-2)


# --- errors, alike in both targets --------------------------------------------------------


@tilejit.kernel
def moving_region(A, B, n):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((32, 64), T.float32)
        T.copy(A, F)
        T.clear(F[0:n, :])
        T.copy(F, B)


@tilejit.kernel
def outside_region(A, B):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((32, 64), T.float32)
        T.copy(A, F)
        T.fill(F[24:40, :], 1.0)
        T.copy(F, B)


@tilejit.kernel
def fragment_to_fragment(A, B):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((32, 64), T.float32)
        G = T.alloc_fragment((16, 64), T.float32)
        T.copy(A, F)
        T.copy(F[0:16, :], G)
        T.copy(G, B[0:16, :])


@tilejit.kernel
def gemm_into_a_region(A, B, C, w: T.constexpr = 32):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 32), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:32], A_shared)
        T.copy(B[0:32, 0:64], B_shared)
        T.clear(C_local[:, :])
        T.gemm(A_shared, B_shared, C_local[:, :w])
        T.copy(C_local, C)


def _run(kernel, args, target, **consts):
    if target == "cuda":
        return kernel.compile(*args, target="cuda", arch="sm_80", **consts)
    return kernel(*args, **consts)


def _f32(*shapes):
    return tuple(np.zeros(s, np.float32) for s in shapes)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_region_moving_at_run_time_is_a_compile_error(target):
    with pytest.raises(CompileError, match=r"`F\[:n, :\]`: a region of fragment 'F' needs "
                                           r"bounds known at compile time"):
        _run(moving_region, (*_f32((32, 64), (32, 64)), 8), target)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_region_outside_the_fragment_is_a_compile_error(target):
    with pytest.raises(CompileError, match=r"the region is outside fragment 'F' of shape "
                                           r"\(32, 64\) \(dimension 0: 24:40\)"):
        _run(outside_region, _f32((32, 64), (32, 64)), target)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_copy_between_a_region_and_a_fragment_is_a_compile_error(target):
    with pytest.raises(CompileError, match=r"T.copy between `F\[:16, :\]` and fragment 'G': "
                                           r"the region's sliced dimensions must be whole"):
        _run(fragment_to_fragment, _f32((32, 64), (32, 64)), target)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_gemm_into_part_of_its_accumulator_is_a_compile_error(target):
    args = (np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16),
            np.zeros((64, 64), np.float32))
    with pytest.raises(CompileError, match="the accumulator must be a whole fragment"):
        _run(gemm_into_a_region, args, target)


def test_a_region_that_is_the_whole_fragment_is_the_fragment():
    a, b = _half((64, 32), 6), _half((32, 64), 7)
    c = np.zeros((64, 64), np.float32)
    gemm_into_a_region(a, b, c, w=64)
    torch.testing.assert_close(torch.from_numpy(c).double(), _f64(a) @ _f64(b),
                               rtol=1e-3, atol=1e-3)


# --- PTX -----------------------------------------------------------------------------------


def _compiled(arch):
    f32 = np.zeros((32, 64), np.float32)
    yield clear_fill.compile(f32, f32.copy(), target="cuda", arch=arch)
    yield copies.compile(np.zeros((16, 64), np.float32), *_f32((20, 64), (16, 32), (3, 32)),
                         target="cuda", arch=arch)
    yield gemm_with_a_cleared_region.compile(np.zeros((64, 64), np.float16),
                                             np.zeros((64, 64), np.float16),
                                             np.zeros((64, 64), np.float32),
                                             target="cuda", arch=arch)
    yield alias.compile(np.zeros((128, 64), np.float16), np.zeros((128, 64), np.float16),
                        np.zeros((128, 128), np.float16), target="cuda", arch=arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for compiled in _compiled(arch):
        ptxas(compiled.ptx, arch)


# --- on the GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    a = np.random.default_rng(0).random((32, 64)).astype(np.float32)
    out = torch.zeros(32, 64, device="cuda")
    clear_fill(torch.from_numpy(a).cuda(), out, r0=28, r1=32, c0=0, value=-2.5)
    sim = np.zeros_like(a)
    clear_fill(a, sim, r0=28, r1=32, c0=0, value=-2.5)
    np.testing.assert_array_equal(out.cpu().numpy(), sim)
    np.testing.assert_array_equal(sim, _clear_fill_reference(a, 28, 32, 0, -2.5))

    a = np.random.default_rng(1).random((16, 64)).astype(np.float32)
    outs = [torch.full((20, 64), -9.0, device="cuda"), torch.zeros(16, 32, device="cuda"),
            torch.zeros(3, 32, device="cuda")]
    copies(torch.from_numpy(a).cuda(), *outs)
    for got, want in zip(outs, _copies_reference(a, 20)):
        np.testing.assert_array_equal(got.cpu().numpy(), want)

    a, b = _half((64, 64), 2), _half((64, 64), 3)
    c = torch.zeros(64, 64, device="cuda")
    gemm_with_a_cleared_region(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    sim = np.zeros((64, 64), np.float32)
    gemm_with_a_cleared_region(a, b, sim)
    want = _f64(a) @ _f64(b)
    want[:, 16:] += 1
    torch.testing.assert_close(c.cpu().double(), want, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(c.cpu().numpy(), sim, rtol=1e-3, atol=1e-3)

    a, b = _half((128, 64), 4), _half((128, 64), 5)
    c = torch.zeros(128, 128, device="cuda", dtype=torch.float16)
    alias(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    torch.testing.assert_close(c.cpu().double(), _f64(a) @ _f64(b).T, rtol=1e-2, atol=1e-2)


@tilejit.kernel
def rows_of_a_fragment(L, O, P):
    """TileLang's flash-decoding combine: `T.copy(lse_local[k, :], split)` in a pipelined
    loop (k moves at run time), and the reverse, a row of a fragment written whole."""
    with T.Kernel(1, threads=128) as bx:
        lse_local = T.alloc_fragment((4, 64), T.float32)
        split = T.alloc_fragment((64,), T.float32)
        acc = T.alloc_fragment((64,), T.float32)
        back = T.alloc_fragment((4, 64), T.float32)
        T.copy(L, lse_local)
        T.clear(acc)
        for k in T.Pipelined(4):
            T.copy(lse_local[k, :], split)
            for i in T.Parallel(64):
                acc[i] += split[i] * (k + 1)
                split[i] = split[i] * 2
            T.copy(split, back[k, :])
        T.copy(acc, O)
        T.copy(back, P)


def _rows_reference(lv):
    return (lv * np.arange(1, 5, dtype=np.float32)[:, None]).sum(0), lv * 2


def test_a_row_of_a_fragment_copied_to_and_from_a_fragment():
    lv = np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)
    o, p = np.zeros(64, np.float32), np.zeros((4, 64), np.float32)
    rows_of_a_fragment(lv, o, p)
    ref_o, ref_p = _rows_reference(lv)
    np.testing.assert_allclose(o, ref_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(p, ref_p)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_rows_of_a_fragment_assemble(arch, ptxas):
    lv, o, p = _f32((4, 64), (64,), (4, 64))
    ptxas(rows_of_a_fragment.compile(lv, o, p, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_rows_of_a_fragment_on_the_gpu():
    lv = torch.randn(4, 64)
    o, p = torch.zeros(64, device="cuda"), torch.zeros(4, 64, device="cuda")
    rows_of_a_fragment(lv.cuda(), o, p)
    ref_o, ref_p = _rows_reference(lv.numpy())
    torch.testing.assert_close(o.cpu(), torch.from_numpy(ref_o), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(p.cpu(), torch.from_numpy(ref_p), rtol=0, atol=0)


# --- atomics whose value is a region of a fragment -----------------------------------------


@tilejit.kernel
def atomic_rows(A, Out, M, r: T.constexpr = 1):
    """``T.atomic_add(Out[0, 0], F[r:r + 1, :])`` (the value's region gives the extents:
    one row into Out's first row, from its corner) by every block, and
    ``T.atomic_max(M[1, 4:20], F[2, 8:24])`` (a region pinned in one dimension)."""
    with T.Kernel(4, threads=128) as bx:
        F = T.alloc_fragment((16, 32), T.float32)
        T.copy(A[bx * 16, 0], F)
        T.atomic_add(Out[0, 0], F[r:r + 1, :])
        T.atomic_max(M[1, 4:20], F[2, 8:24])


def _atomic_reference(a, out, m, r=1):
    out, m = out.copy(), m.copy()
    blocks = a.reshape(4, 16, 32)
    out[0] += blocks[:, r, :].sum(0, dtype=np.float64).astype(np.float32)
    m[1, 4:20] = np.maximum(m[1, 4:20], blocks[:, 2, 8:24].max(0))
    return out, m


def _atomic_inputs():
    a = np.random.default_rng(9).integers(-8, 8, (64, 32)).astype(np.float32)
    return a, np.ones((2, 32), np.float32), np.full((2, 24), -100.0, np.float32)


@pytest.mark.parametrize("r", [1, 7])
def test_atomics_with_a_fragment_region_value(r, ptxas):
    a, out, m = _atomic_inputs()
    want = _atomic_reference(a, out, m, r)
    atomic_rows(a, out, m, r=r)
    np.testing.assert_array_equal(out, want[0])
    np.testing.assert_array_equal(m, want[1])
    for arch in ("sm_80", "sm_90a"):
        ptx = atomic_rows.compile(a, out, m, r=r, target="cuda", arch=arch).ptx
        assert "atom.global.add.f32" in ptx or "red.global.add.f32" in ptx
        ptxas(ptx, arch)


@tilejit.kernel
def atomic_into_a_fragment(A):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((16, 32), T.float32)
        G = T.alloc_fragment((16, 32), T.float32)
        T.clear(F)
        T.clear(G)
        T.atomic_add(F, G[0:4, :])
        T.copy(F, A)


def test_an_atomic_into_a_fragment_is_a_compile_error():
    with pytest.raises(CompileError, match="into a fragment is not supported"):
        atomic_into_a_fragment.compile(np.zeros((16, 32), np.float32), target="cuda",
                                       arch="sm_80")


@pytest.mark.gpu
def test_gpu_atomics_with_a_fragment_region_value():
    a, out, m = _atomic_inputs()
    want = _atomic_reference(a, out, m, 7)
    got = [torch.from_numpy(x).cuda() for x in (a, out, m)]
    atomic_rows(*got, r=7)
    atomic_rows(a, out, m, r=7)
    for g, s, w in zip(got[1:], (out, m), want):
        np.testing.assert_array_equal(g.cpu().numpy(), w)      # integers: exact sums
        np.testing.assert_array_equal(s, w)

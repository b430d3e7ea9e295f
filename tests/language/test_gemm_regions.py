"""T.gemm on a region of a shared tile, written as TileLang programs write it: the second
half of a wider A tile (``A_shared[:, block_K:]``), a sub-box of B, both, the transposed
forms, and MLA's ``Q_shared[:, :D]`` / ``Q_shared[:, D:]`` pair accumulating into one
fragment; a stacked tile's version (``A_shared[b, :, :]``) stays as it was. In
simulation against float64 torch, the PTX assembled by ptxas (mma.sync on sm_80; on
sm_90a wgmma where the region starts on its layout's swizzle atom, mma.sync where it does
not), the errors the same at compilation and in simulation, and with ``-m gpu`` against
torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def second_half_of_a(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                     block_K: T.constexpr = 32):
    """TileLang's gemm_with_stride: A_shared holds 2 * block_K columns, the gemm reads
    its second half."""
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((block_M, 2 * block_K), T.float16)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        T.copy(A[0:block_M, 0:2 * block_K], A_shared)
        T.copy(B[0:block_K, 0:block_N], B_shared)
        T.gemm(A_shared[:, block_K:], B_shared[0:block_K, 0:block_N], C_local)
        T.copy(C_local, C[0:block_M, 0:block_N])


@tilejit.kernel
def regions(A, B, C, a_rows: T.constexpr, a_cols: T.constexpr, b_rows: T.constexpr,
            b_cols: T.constexpr, ar: T.constexpr = 0, ac: T.constexpr = 0,
            br: T.constexpr = 0, bc: T.constexpr = 0, trans_A: T.constexpr = False,
            trans_B: T.constexpr = False, M: T.constexpr = 64, N: T.constexpr = 64,
            K: T.constexpr = 32):
    """C = op(A_shared[region]) @ op(B_shared[region]), each region at (ar, ac) / (br,
    bc) of a larger shared tile."""
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((a_rows, a_cols), T.float16)
        B_shared = T.alloc_shared((b_rows, b_cols), T.float16)
        C_local = T.alloc_fragment((M, N), T.float32)
        T.copy(A[0:a_rows, 0:a_cols], A_shared)
        T.copy(B[0:b_rows, 0:b_cols], B_shared)
        if trans_A and trans_B:
            T.gemm(A_shared[ar:ar + K, ac:ac + M], B_shared[br:br + N, bc:bc + K], C_local,
                   transpose_A=True, transpose_B=True, clear_accum=True)
        elif trans_A:
            T.gemm(A_shared[ar:ar + K, ac:ac + M], B_shared[br:br + K, bc:bc + N], C_local,
                   transpose_A=True, clear_accum=True)
        elif trans_B:
            T.gemm(A_shared[ar:ar + M, ac:ac + K], B_shared[br:br + N, bc:bc + K], C_local,
                   transpose_B=True, clear_accum=True)
        else:
            T.gemm(A_shared[ar:ar + M, ac:ac + K], B_shared[br:br + K, bc:bc + N], C_local,
                   clear_accum=True)
        T.copy(C_local, C[0:M, 0:N])


@tilejit.kernel
def mla_scores(Q, KV, KV_tail, P, H: T.constexpr = 64, D: T.constexpr = 64,
               D_tail: T.constexpr = 32, BI: T.constexpr = 64):
    """DeepSeek's sparse MLA: Q_shared holds the D latent and the D_tail rotary columns
    of each head; the scores are Q[:, :D] @ KV^T + Q[:, D:] @ KV_tail^T in one
    fragment."""
    with T.Kernel(1, threads=128) as bx:
        Q_shared = T.alloc_shared((H, D + D_tail), T.float16)
        KV_shared = T.alloc_shared((BI, D), T.float16)
        KV_tail_shared = T.alloc_shared((BI, D_tail), T.float16)
        acc_p = T.alloc_fragment((H, BI), T.float32)
        T.copy(Q[0:H, 0:D + D_tail], Q_shared)
        T.copy(KV[0:BI, 0:D], KV_shared)
        T.copy(KV_tail[0:BI, 0:D_tail], KV_tail_shared)
        T.clear(acc_p)
        T.gemm(Q_shared[:, :D], KV_shared, acc_p, transpose_B=True)
        T.gemm(Q_shared[:, D:], KV_tail_shared, acc_p, transpose_B=True)
        T.copy(acc_p, P[0:H, 0:BI])


@tilejit.kernel
def batched(A, B, C, batch: T.constexpr = 2, block_M: T.constexpr = 64,
            block_N: T.constexpr = 64, block_K: T.constexpr = 32):
    """TileLang's gemm_batched: one version of a stacked shared tile per batch."""
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((batch, block_M, block_K), T.float16)
        B_shared = T.alloc_shared((batch, block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        for b in T.serial(batch):
            T.clear(C_local)
            T.copy(A[b, 0:block_M, 0:block_K], A_shared[b, :, :])
            T.copy(B[b, 0:block_K, 0:block_N], B_shared[b, :, :])
            T.gemm(A_shared[b, :, :], B_shared[b, :, :], C_local)
            T.copy(C_local, C[b, 0:block_M, 0:block_N])


def _half(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def _f64(x):
    return torch.from_numpy(np.asarray(x)).double()


def _close(out, ref):
    torch.testing.assert_close(_f64(out), ref, rtol=2e-3, atol=2e-3)


# (a tile shape, b tile shape, ar, ac, br, bc, trans_A, trans_B): M = N = 64, K = 32
CASES = {
    "A region": ((64, 64), (32, 64), 0, 32, 0, 0, False, False),
    "B region": ((64, 32), (96, 128), 0, 0, 64, 64, False, False),
    "both": ((64, 96), (64, 96), 0, 64, 32, 32, False, False),
    "A rows": ((128, 32), (32, 64), 64, 0, 0, 0, False, False),
    "transpose_A": ((64, 128), (32, 64), 0, 64, 0, 0, True, False),
    "transpose_A rows": ((96, 64), (32, 64), 64, 0, 0, 0, True, False),
    "transpose_B": ((64, 32), (64, 96), 0, 0, 0, 64, False, True),
    "transpose_B rows": ((64, 32), (128, 32), 0, 0, 64, 0, False, True),
    "both transposed": ((64, 128), (128, 64), 0, 64, 64, 32, True, True),
    "off the atom": ((64, 64), (32, 64), 0, 8, 0, 0, False, False),
    "off a 16-byte row": ((64, 64), (32, 64), 0, 4, 0, 0, False, False),
    "rows off the atom": ((72, 32), (32, 64), 4, 0, 0, 0, False, False),
}


def _case_args(name):
    a_shape, b_shape, ar, ac, br, bc, ta, tb = CASES[name]
    a, b = _half(a_shape, 1), _half(b_shape, 2)
    consts = dict(a_rows=a_shape[0], a_cols=a_shape[1], b_rows=b_shape[0],
                  b_cols=b_shape[1], ar=ar, ac=ac, br=br, bc=bc, trans_A=ta, trans_B=tb)
    return a, b, consts


def _case_reference(name, a, b):
    _, _, ar, ac, br, bc, ta, tb = CASES[name]
    M, N, K = 64, 64, 32
    ra = _f64(a)[ar:ar + (K if ta else M), ac:ac + (M if ta else K)]
    rb = _f64(b)[br:br + (N if tb else K), bc:bc + (K if tb else N)]
    return (ra.T if ta else ra) @ (rb.T if tb else rb)


def test_the_second_half_of_a_wider_a_tile():
    a, b = _half((64, 64), 1), _half((32, 64), 2)
    c = np.zeros((64, 64), np.float32)
    second_half_of_a(a, b, c)
    _close(c, _f64(a)[:, 32:] @ _f64(b))


@pytest.mark.parametrize("name", list(CASES))
def test_regions_in_simulation_against_float64(name):
    a, b, consts = _case_args(name)
    c = np.zeros((64, 64), np.float32)
    regions(a, b, c, **consts)
    _close(c, _case_reference(name, a, b))


def _mla_inputs():
    return _half((64, 96), 3), _half((64, 64), 4), _half((64, 32), 5)


def _mla_reference(q, kv, kv_tail):
    q = _f64(q)
    return q[:, :64] @ _f64(kv).T + q[:, 64:] @ _f64(kv_tail).T


def test_the_latent_and_rotary_halves_of_q_accumulate_into_one_fragment():
    q, kv, kv_tail = _mla_inputs()
    p = np.zeros((64, 64), np.float32)
    mla_scores(q, kv, kv_tail, p)
    _close(p, _mla_reference(q, kv, kv_tail))


def test_a_version_of_a_stacked_tile_still_works():
    a, b = _half((2, 64, 32), 6), _half((2, 32, 64), 7)
    c = np.zeros((2, 64, 64), np.float32)
    batched(a, b, c)
    _close(c, _f64(a) @ _f64(b))


# --- the PTX ---------------------------------------------------------------------------

# where the region starts on its tile's swizzle atom (wgmma's descriptors stay valid)
WGMMA = {"A region", "B region", "both", "A rows", "transpose_A", "transpose_A rows",
         "transpose_B", "transpose_B rows", "both transposed"}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", list(CASES))
def test_ptx_of_regions_assembles(name, arch, ptxas):
    a, b, consts = _case_args(name)
    ptx = regions.compile(a, b, np.zeros((64, 64), np.float32), **consts, target="cuda",
                          arch=arch).ptx
    ptxas(ptx, arch)
    if arch == "sm_90a" and name in WGMMA:
        assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    else:
        assert "mma.sync" in ptx and "wgmma" not in ptx
    # 16-bit rows on a 16-byte boundary are read with ldmatrix; elsewhere element-wise
    if "mma.sync" in ptx and name != "off a 16-byte row":
        assert "ldmatrix" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_of_the_tilelang_forms_assembles(arch, ptxas):
    a, b = _half((64, 64), 1), _half((32, 64), 2)
    c = np.zeros((64, 64), np.float32)
    want = "wgmma.mma_async" if arch == "sm_90a" else "mma.sync"
    for kernel, args in ((second_half_of_a, (a, b, c)),
                         (mla_scores, (*_mla_inputs(), c)),
                         (batched, (_half((2, 64, 32), 6), _half((2, 32, 64), 7),
                                    np.zeros((2, 64, 64), np.float32)))):
        ptx = kernel.compile(*args, target="cuda", arch=arch).ptx
        assert want in ptx
        ptxas(ptx, arch)


def test_the_gemm_reads_the_region_at_its_offset_in_the_swizzled_tile():
    """sm_80: ``A_shared[:, 32:]`` is read with as many ldmatrix and mma as the same gemm
    at origin 0, at other addresses."""
    a, b, consts = _case_args("A region")
    moved = regions.compile(a, b, np.zeros((64, 64), np.float32), **consts, target="cuda",
                            arch="sm_80").ptx
    at_zero = regions.compile(a, b, np.zeros((64, 64), np.float32),
                              **dict(consts, ac=0), target="cuda", arch="sm_80").ptx
    assert moved != at_zero
    assert moved.count("ldmatrix") == at_zero.count("ldmatrix")
    assert moved.count("mma.sync") == at_zero.count("mma.sync")


# --- errors: the same at compilation and in simulation ---------------------------------


@tilejit.kernel
def wrong_extent(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 64), T.float16)
        B_shared = T.alloc_shared((64, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:64], A_shared)
        T.copy(B[0:64, 0:64], B_shared)
        T.clear(C_local)
        T.gemm(A_shared[:, 32:], B_shared[0:16, :], C_local)
        T.copy(C_local, C[0:64, 0:64])


@tilejit.kernel
def wrong_rows(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 64), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:64], A_shared)
        T.copy(B[0:32, 0:64], B_shared)
        T.clear(C_local)
        T.gemm(A_shared[0:32, 32:64], B_shared, C_local)
        T.copy(C_local, C[0:64, 0:64])


@tilejit.kernel
def moving_region(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 64), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:64], A_shared)
        T.copy(B[0:32, 0:64], B_shared)
        T.clear(C_local)
        for k in T.serial(2):
            T.gemm(A_shared[:, k * 32:k * 32 + 32], B_shared, C_local)
        T.copy(C_local, C[0:64, 0:64])


@tilejit.kernel
def fragment_region(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_local = T.alloc_fragment((64, 64), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:64], A_local)
        T.copy(B[0:32, 0:64], B_shared)
        T.clear(C_local)
        T.gemm(A_local[:, 32:], B_shared, C_local)
        T.copy(C_local, C[0:64, 0:64])


@tilejit.kernel
def outside(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 64), T.float16)
        B_shared = T.alloc_shared((32, 64), T.float16)
        C_local = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64, 0:64], A_shared)
        T.copy(B[0:32, 0:64], B_shared)
        T.clear(C_local)
        T.gemm(A_shared[:, 48:80], B_shared, C_local)
        T.copy(C_local, C[0:64, 0:64])


def _error_args():
    return (np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16),
            np.zeros((64, 64), np.float32))


def _region_error_args():
    """A (64, 64) A, a (32, 64) B and a (64, 64) C: the error kernels' arguments."""
    return (np.zeros((64, 64), np.float16), np.zeros((32, 64), np.float16),
            np.zeros((64, 64), np.float32))


def _runs(kernel, args, target):
    if target == "cuda":
        return lambda: kernel.compile(*args, target="cuda", arch="sm_80")
    return lambda: kernel(*args)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_b_region_of_the_wrong_extent_names_expected_and_received(target):
    with pytest.raises(CompileError, match=r"T.gemm: operand B `B_shared\[0:16, 0:64\]`: "
                                           r"expected a 32x64 region \(K x N; K = 32 from A, "
                                           r"N = 64 from C\), got 16x64") as e:
        _runs(wrong_extent, _error_args(), target)()
    assert "T.gemm(A_shared[:, 32:], B_shared[0:16, :], C_local)" in str(e.value)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_an_a_region_of_the_wrong_rows_names_expected_and_received(target):
    args = _region_error_args()
    with pytest.raises(CompileError, match=r"T.gemm: operand A `A_shared\[0:32, 32:64\]`: "
                                           r"expected a 64x32 region \(M x K; M = 64 from C, "
                                           r"K = 32 from B\), got 32x32") as e:
        _runs(wrong_rows, args, target)()
    assert "T.gemm(A_shared[0:32, 32:64], B_shared, C_local)" in str(e.value)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_region_moving_at_run_time_is_a_clear_compile_error(target):
    args = _region_error_args()
    with pytest.raises(CompileError, match=r"T.gemm: operand A `A_shared\[:, k \* 32:k \* 32 "
                                           r"\+ 32\]`: the region's start `k \* 32` must be "
                                           r"known at compile time"):
        _runs(moving_region, args, target)()


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_region_of_a_fragment_is_a_clear_compile_error(target):
    args = _region_error_args()
    with pytest.raises(CompileError, match=r"T.gemm: operand A `A_local\[0:64, 32:64\]`: a "
                                           r"region of a fragment tile is not supported as a "
                                           r"gemm operand"):
        _runs(fragment_region, args, target)()


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_region_outside_its_tile_is_a_clear_compile_error(target):
    args = _region_error_args()
    with pytest.raises(CompileError, match=r"T.gemm: operand A `A_shared\[0:64, 48:80\]`: the "
                                           r"region is outside tile A_shared of shape "
                                           r"\(64, 64\)"):
        _runs(outside, args, target)()


# --- on the GPU --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_regions_on_the_gpu_against_torch_and_the_simulator(name):
    a, b, consts = _case_args(name)
    out = torch.zeros(64, 64, device="cuda")
    regions(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out, **consts)
    sim = np.zeros((64, 64), np.float32)
    regions(a, b, sim, **consts)
    _close(out.cpu().numpy(), _case_reference(name, a, b))
    np.testing.assert_allclose(out.cpu().numpy(), sim, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_the_tilelang_forms_on_the_gpu_against_torch_and_the_simulator():
    q, kv, kv_tail = _mla_inputs()
    out = torch.zeros(64, 64, device="cuda")
    mla_scores(*(torch.from_numpy(x).cuda() for x in (q, kv, kv_tail)), out)
    sim = np.zeros((64, 64), np.float32)
    mla_scores(q, kv, kv_tail, sim)
    _close(out.cpu().numpy(), _mla_reference(q, kv, kv_tail))
    np.testing.assert_allclose(out.cpu().numpy(), sim, rtol=1e-3, atol=1e-3)

    a, b = _half((64, 64), 1), _half((32, 64), 2)
    out = torch.zeros(64, 64, device="cuda")
    second_half_of_a(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    _close(out.cpu().numpy(), _f64(a)[:, 32:] @ _f64(b))

    a, b = _half((2, 64, 32), 6), _half((2, 32, 64), 7)
    out = torch.zeros(2, 64, 64, device="cuda")
    batched(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    _close(out.cpu().numpy(), _f64(a) @ _f64(b))


def halves_by_prologue():
    """An eager program's prologue computes the region's bound (``half = dim // 2``), as
    TileLang's sparse-MLA kernels do: a compile-time value the compiler folds, so the
    simulator takes it too."""
    @T.prim_func
    def main(A, B, C):
        dim = 64
        half = dim // 2
        A: T.Tensor[[64, dim], T.float16]
        B: T.Tensor[[dim, 64], T.float16]
        C: T.Tensor[[64, 64], T.float32]
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, dim), T.float16)
            B_s = T.alloc_shared((dim, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s[:, :half], B_s[:half, :], acc)
            T.gemm(A_s[:, half:], B_s[half:, :], acc)
            T.copy(acc, C)
    return main


def test_a_bound_the_prologue_computes_is_known_in_simulation():
    a = torch.randn(64, 64).to(torch.float16)
    b = torch.randn(64, 64).to(torch.float16)
    c = torch.zeros(64, 64)
    tilejit.compile(halves_by_prologue(), target="sim")(a, b, c)
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)

"""T.gemm on Hopper's wgmma.mma_async (sm_90a): which gemms the compiler puts on it, the
accumulator layout against the PTX ISA's formula, the descriptors' offsets against the
tiles' layouts, the PTX (assembled by ptxas), and, with ``-m gpu``, the results on the
device against torch (float64) and the simulator."""
import itertools

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from kernels import TORCH, gemm
from kernels import gemm_inputs as _inputs
from tilejit.ir.gemm_plan import plan_gemm, wgmma_fragment, with_wgmma
from tilejit.ir.smem_layouts import canonical_layout
from tilejit.layouts import make_swizzled_layout
from tilejit.codegen.lowering.wgmma import operand_offset

gemm_sim = tilejit.kernel(gemm.func, target="sim")


@pytest.mark.parametrize("groups_m,groups_n,slices,n_blocks",
                         [(1, 1, 1, 32), (2, 1, 1, 32), (1, 1, 2, 16), (1, 2, 1, 8), (2, 2, 2, 4)])
def test_accumulator_layout_is_the_ptx_formula(groups_m, groups_n, slices, n_blocks):
    """PTX ISA, wgmma D fragments: in warpgroup g, thread t = 32 w + lane of an m64nN
    instruction holds d[i] at row 16 w + lane / 4 + 8 (i % 4 >= 2), column
    8 (i / 4) + 2 (lane % 4) + i % 2."""
    F = wgmma_fragment(groups_m, groups_n, slices, n_blocks)
    n = 8 * n_blocks
    seen = set()
    for g, rm in itertools.product(range(groups_m * groups_n), range(slices)):
        gm, gn = g % groups_m, g // groups_m
        for t, i in itertools.product(range(128), range(4 * n_blocks)):
            w, lane = divmod(t, 32)
            row = 64 * (rm + slices * gm) + 16 * w + lane // 4 + 8 * (i % 4 >= 2)
            col = n * gn + 8 * (i // 4) + 2 * (lane % 4) + i % 2
            assert F(row, col) == (128 * g + t, 4 * n_blocks * rm + i)
            seen.add((row, col))
    assert len(seen) == F.shape[0] * F.shape[1]


@pytest.mark.parametrize("shape", [(128, 64), (64, 256), (128, 32), (64, 16), (256, 64),
                                   (64, 128)])
def test_descriptor_offsets_agree_with_the_tile_layout(shape):
    """The byte offset the lowering adds to a descriptor for the atom at (mn0, k0) is
    where the tile's own layout puts that element (row mn0 % 8 == 0: no swizzle term)."""
    layout = make_swizzled_layout(shape, 2)
    swizzle, width = canonical_layout(layout, shape, 2)
    smem = (swizzle, width, *shape)
    rows, cols = shape
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, 8):
            if c0 % 16:
                continue
            # K-major: rows are m/n, columns k;  MN-major: rows are k, columns m/n
            assert operand_offset(smem, r0, c0, 2, False) == 2 * layout(r0, c0)
            if c0 % width == 0:
                assert operand_offset(smem, c0, r0, 2, True) == 2 * layout(r0, c0)


def _plan(M, N, K, threads, ta=False, tb=False, dtypes=("float16", "float16", "float32"),
          policy="Square"):
    gp = plan_gemm(M, N, K, dtypes, ta, tb, policy, threads)
    size = 1 if dtypes[0] == "int8" else 2 if dtypes[0] != "float32" else 4
    a = make_swizzled_layout((K, M) if ta else (M, K), size)
    b = make_swizzled_layout((N, K) if tb else (K, N), size)
    return with_wgmma(gp, canonical_layout(a, (K, M) if ta else (M, K), size),
                      canonical_layout(b, (N, K) if tb else (K, N), size))


def test_warpgroups_take_the_widest_instruction():
    assert _plan(128, 256, 64, 256).instr == "m64n256k16"          # 2 x 1 warpgroups
    assert _plan(128, 256, 64, 256).warpgroups_m == 2
    assert _plan(128, 128, 64, 128).repeat_m == 2                   # one warpgroup, 2 slices
    assert _plan(64, 512, 32, 256).instr == "m64n256k16"            # N split over 2 groups
    assert _plan(128, 128, 64, 256, policy="FullCol").instr == "m64n64k16"


def test_what_wgmma_cannot_take_stays_on_mma_sync():
    assert _plan(32, 128, 64, 128) is None                          # M < 64 per warpgroup
    assert _plan(96, 96, 64, 96) is None                            # not whole warpgroups
    assert _plan(64, 64, 64, 128, dtypes=("float32", "float32", "float32")) is None
    # int8 reads both operands K-major: B stored (N, K)
    assert _plan(64, 64, 64, 128, dtypes=("int8", "int8", "int32")) is None
    assert _plan(64, 64, 64, 128, tb=True, ta=True, dtypes=("int8", "int8", "int32")) is None
    assert _plan(128, 128, 64, 128, tb=True, dtypes=("int8", "int8", "int32")).instr == \
        "m64n128k32"


def test_int8_ptx_uses_integer_wgmma(ptxas):
    a, b, A, B = _inputs(256, 256, 256, "int8", False, True)
    c = torch.zeros(256, 256, dtype=torch.int32)
    ptx = gemm.compile(A, B, c, target="cuda", arch="sm_90a", block_K=64, acc="int32",
                       trans_B=True).ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" in ptx
    ptxas(ptx, "sm_90a")


def _ptx(arch, **cfg):
    a, b, A, B = _inputs(256, 256, 256, "float16", cfg.get("trans_A", False),
                         cfg.get("trans_B", False))
    c = torch.zeros(256, 256, dtype=torch.float32)
    return gemm.compile(A, B, c, target="cuda", arch=arch, **cfg).ptx


@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (True, False), (False, True),
                                             (True, True)])
def test_sm90a_ptx_uses_wgmma_and_assembles(trans_A, trans_B, ptxas):
    ptx = _ptx("sm_90a", block_M=128, block_N=128, block_K=64, threads=256, trans_A=trans_A,
               trans_B=trans_B)
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "wgmma.wait_group.sync.aligned" in ptx and "mma.sync" not in ptx
    assert "ldmatrix" not in ptx
    ptxas(ptx, "sm_90a")


def test_sm90_and_the_switch_keep_mma_sync(monkeypatch):
    assert "mma.sync.aligned" in _ptx("sm_90", block_K=64)
    monkeypatch.setenv("TILEJIT_WGMMA", "0")
    ptx = _ptx("sm_90a", block_K=64)
    assert "mma.sync.aligned" in ptx and "wgmma" not in ptx


GPU_CASES = [
    (M, N, K, dtype, acc, dict(opts, **cfg))
    for dtype, acc in [("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")]
    for (M, N, K) in [(512, 512, 512), (1000, 777, 513)]
    for opts in [{}, {"trans_A": True}, {"trans_B": True}, {"trans_A": True, "trans_B": True}]
    for cfg in [dict(block_M=128, block_N=256, block_K=64, threads=256, stages=3)]
] + [
    (M, N, K, "int8", "int32", dict(trans_B=True, block_M=128, block_N=bn, block_K=64,
                                    threads=t, stages=3))
    for (M, N, K) in [(512, 512, 512), (1000, 784, 528)] for bn, t in [(128, 128), (256, 256)]
] + [
    (1000, 777, 513, "float16", "float32", dict(block_M=bm, block_N=bn, block_K=bk, threads=t,
                                                stages=s, trans_B=tb))
    for bm, bn, bk, t, s in [(64, 64, 64, 128, 2), (128, 128, 64, 128, 3),
                             (128, 128, 32, 256, 4), (64, 256, 16, 128, 2),
                             (256, 128, 64, 256, 3), (64, 512, 32, 256, 2),
                             (128, 128, 64, 256, 0)]
    for tb in (False, True)
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,acc,opts", GPU_CASES)
def test_wgmma_gemm_gpu_matches_torch_and_simulator(M, N, K, dtype, acc, opts):
    from tilejit.runtime.cuda_driver import device_arch
    if device_arch(0) != "sm_90a":
        pytest.skip("wgmma needs an sm_90 device")
    ta, tb = opts.get("trans_A", False), opts.get("trans_B", False)
    opts = dict(opts, acc=acc)
    a, b, A, B = _inputs(M, N, K, dtype, ta, tb, device="cuda", seed=M + N + K)
    poison = -(2 ** 31) if acc == "int32" else float("nan")
    c = torch.full((M, N), poison, dtype=TORCH[acc], device="cuda")
    assert "wgmma.mma_async" in gemm.compile(A, B, c, **opts).ptx
    gemm(A, B, c, **opts)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    got = c.double().cpu()
    if dtype == "int8":
        assert torch.equal(got, ref)
        c_sim = torch.zeros(M, N, dtype=torch.int32)
        gemm_sim(A.cpu(), B.cpu(), c_sim, **opts)
        assert torch.equal(got, c_sim.double())
        return
    rel = ((got - ref).norm() / ref.norm()).item()
    assert rel < (3e-3 if acc == "float16" else 1e-3), rel
    if M * N * K <= 512 ** 3:
        c_sim = torch.zeros(M, N, dtype=TORCH[acc])
        gemm_sim(A.cpu(), B.cpu(), c_sim, **opts)
        np.testing.assert_allclose(got.numpy(), c_sim.double().numpy(), rtol=2e-2, atol=0.1)


@tilejit.kernel
def gemm_persistent(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                    block_K: T.constexpr = 64, threads: T.constexpr = 256,
                    stages: T.constexpr = 3, sms: T.constexpr = 7, stage_c: T.constexpr = False):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(sms, threads=threads) as (block_id):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), C.dtype)
        for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sms,
                                   block_id):
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            if stage_c:
                T.copy(C_f, C_s)
                T.copy(C_s, C[bx * block_M, by * block_N])
            else:
                T.copy(C_f, C[bx * block_M, by * block_N])


def test_a_persistent_pipeline_is_warp_specialized_across_tiles(ptxas):
    a = np.zeros((512, 512), np.float16)
    for stage_c in (False, True):
        cfg = dict(block_M=128, block_N=128, stages=4, stage_c=stage_c)
        k = gemm_persistent.compile(a, a.copy(), a.copy(), target="cuda", arch="sm_90a",
                                    **cfg).compiled
        assert k.block_threads == 384 and "setmaxnreg.inc" in k.ptx
        # the consumers' epilogue through shared memory (written so, or staged by the
        # compiler: epilogue_staging.py) synchronizes on barrier 1 only, and TMA stores it
        assert "bar.sync 1, 256;" in k.ptx and "bar.sync \t0" not in k.ptx.split("setmaxnreg")[-1]
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in k.ptx
        ptxas(k.ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,cfg", [
    # rows of 16-byte multiples (TMA's condition: else cp.async, not warp-specialized)
    (1000, 776, 520, dict(block_N=256, stages=3, sms=7)),
    (1024, 1024, 1024, dict(block_N=128, stages=4, sms=5, stage_c=True)),
    (700, 904, 304, dict(block_N=128, stages=2, sms=132, stage_c=True)),
])
def test_persistent_wgmma_gemm_gpu_matches_torch_and_simulator(M, N, K, cfg):
    """Several tiles per block: the stage counters and mbarrier phases run on across
    tiles; the producer loads the next tile while the consumers store this one."""
    from tilejit.runtime.cuda_driver import device_arch
    if device_arch(0) != "sm_90a":
        pytest.skip("wgmma needs an sm_90 device")
    a, b, A, B = _inputs(M, N, K, "float16", False, False, device="cuda", seed=M + K)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    assert "setmaxnreg" in gemm_persistent.compile(A, B, c, **cfg).ptx
    gemm_persistent(A, B, c, **cfg)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    got = c.double().cpu()
    assert ((got - ref).norm() / ref.norm()).item() < 1e-3
    c_sim = torch.zeros(M, N, dtype=torch.float16)
    tilejit.kernel(gemm_persistent.func, target="sim")(A.cpu(), B.cpu(), c_sim, **cfg)
    np.testing.assert_allclose(got.numpy(), c_sim.double().numpy(), rtol=2e-2, atol=0.1)


def _int8_gemm(M, N, K, bM, bN, bK, threads):
    import tilejit as tl

    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"),
             C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "int8")
            B_s = T.alloc_shared((bN, bK), "int8")
            C_l = T.alloc_fragment((bM, bN), "int32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[bx * bN, k * bK], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bM, bx * bN])
    return tl.compile(main, out_idx=[2])


@pytest.mark.parametrize("N, bN, threads", [(40, 40, 128), (80, 80, 256), (48, 48, 128)])
def test_integer_wgmma_takes_only_its_shapes(N, bN, threads, ptxas):
    """Integer wgmma's N is 8, 16, 24 or a multiple of 16: an int8 tile of 40 columns a
    warpgroup (or 80 over two) stays on mma.sync, one of 48 takes wgmma; exact either way."""
    import torch
    kernel = _int8_gemm(64, N, 128, 64, bN, 64, threads)
    a = torch.randint(-8, 8, (64, 128), dtype=torch.int8)
    b = torch.randint(-8, 8, (N, 128), dtype=torch.int8)
    assert torch.equal(kernel(a, b), a.int() @ b.int().T)
    ptx = kernel.get_kernel_source(arch="sm_90a")
    assert ("wgmma.mma_async" in ptx) == (N == 48)
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("N, bN, threads", [(40, 40, 128), (80, 80, 256), (48, 48, 128)])
def test_gpu_integer_wgmma_shapes(N, bN, threads):
    import torch
    kernel = _int8_gemm(64, N, 128, 64, bN, 64, threads)
    a = torch.randint(-8, 8, (64, 128), dtype=torch.int8)
    b = torch.randint(-8, 8, (N, 128), dtype=torch.int8)
    assert torch.equal(kernel(a.cuda(), b.cuda()).cpu(), a.int() @ b.int().T)

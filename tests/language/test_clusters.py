"""Thread block clusters: T.ClusterKernel, T.block_rank_in_cluster and T.copy_cluster's
multicast loads (language/cluster.py, passes/clusters.py, the multicast pipeline of
passes/warp_specialize.py). The simulator checks the multicast contract (every block of
a mask names the same regions); sm_90a multicasts B in a warp-specialized pipeline."""
import os
import sys

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from gemm_multicast import matmul_multicast, reference  # noqa: E402


def _ranks(R, G, cx: T.constexpr = 2, cy: T.constexpr = 2):
    gx, gy = R.shape
    with T.ClusterKernel(gx, gy, threads=32, cluster_dims=(cx, cy)) as (bx, by):
        rank = T.block_rank_in_cluster()
        R[bx, by] = rank
        G[bx, by] = T.get_block_extent(0) * by + bx


ranks = tilejit.kernel(_ranks)
ranks_sim = tilejit.kernel(_ranks, target="sim")


def _rank_ref(gx, gy, cx, cy):
    bx, by = np.meshgrid(np.arange(gx), np.arange(gy), indexing="ij")
    return bx % cx + (by % cy) * cx


def test_rank_in_cluster_simulated():
    R = np.full((4, 6), -1, np.int32)
    G = np.zeros((4, 6), np.int32)
    ranks(R, G, cx=2, cy=3)
    np.testing.assert_array_equal(R, _rank_ref(4, 6, 2, 3))


@tilejit.kernel
def copy_rows(A, B, C, shift: T.constexpr = 0, skip: T.constexpr = -1,
              mask: T.constexpr = 0b11, block: T.constexpr = 16):
    """Block bx adds B's rows of its cluster (both blocks name them) to its rows of A; a
    test may shift one rank's region or make one rank skip the copy."""
    M, N = A.shape
    with T.ClusterKernel(T.ceildiv(M, block), threads=128, cluster_dims=2) as bx:
        rank = T.block_rank_in_cluster()
        A_s = T.alloc_shared((block, N), A.dtype)
        B_s = T.alloc_shared((block, N), A.dtype)
        T.copy(A[bx * block, 0], A_s)
        T.fill(B_s, 0)
        if rank != skip:
            T.copy_cluster(B[(bx // 2) * block + shift * rank, 0], B_s, cluster_mask=mask)
        for i, j in T.Parallel(block, N):
            C[bx * block + i, j] = A_s[i, j] + B_s[i, j]


def _rows_ref(A, B, block=16):
    r = np.arange(A.shape[0])
    return A + B[(r // (2 * block)) * block + r % block]


def test_copy_cluster_simulated():
    A = np.random.rand(64, 32).astype(np.float32)
    B = np.random.rand(64, 32).astype(np.float32)
    C = np.zeros_like(A)
    copy_rows(A, B, C)
    np.testing.assert_allclose(C, _rows_ref(A, B), rtol=1e-6)


def test_the_blocks_of_the_mask_receive_the_issuers_region():
    """TileLang's multicast: rank 1 names rows shifted by one, and receives rank 0's."""
    A = np.random.rand(64, 32).astype(np.float32)
    B = np.random.rand(64, 32).astype(np.float32)
    C = np.zeros_like(A)
    copy_rows(A, B, C, shift=1)
    np.testing.assert_allclose(C, _rows_ref(A, B), rtol=1e-6)


def test_the_compiler_names_the_issuers_region_only_where_the_blocks_differ(ptxas):
    """The region of rank 0 (the issuer) where the mask's blocks name different ones; the
    same region everywhere (shift 0) is left as written."""
    A = np.zeros((64, 32), np.float32)
    for shift, rewritten in ((1, True), (0, False)):
        ptx = copy_rows.compile(A, A, A, target="cuda", arch="sm_90a", shift=shift).ptx
        assert ("%cluster_ctarank" in ptx) == rewritten or shift == 0
        ptxas(ptx, "sm_90a")


def _after_cluster_forms(kernel, args, tmp_path, monkeypatch) -> str:
    """The device program after the cluster pass, compiled for sm_90a (the IR dump)."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    assert kernel.compile(*args, target="cuda", arch="sm_90a").ptx
    (directory,) = tmp_path.iterdir()
    return (directory / "03_after_lower_cluster_forms.py").read_text()


@tilejit.kernel
def rows_by_thirds(A, B, block: T.constexpr = 16):
    """Block bx names rows (bx // 3) * block: ranks 0 and 1 of a cluster of 2 differ for
    some clusters only (bx = 2, 3; 8, 9; …): the rank 1 of those receives rank 0's."""
    with T.ClusterKernel(12, threads=128, cluster_dims=2) as bx:
        A_s = T.alloc_shared((block, 32), A.dtype)
        T.copy_cluster(A[(bx // 3) * block, 0], A_s, cluster_mask=0b11)
        T.copy(A_s, B[bx * block, 0])


def test_regions_that_differ_in_some_clusters_only_are_the_issuers(tmp_path, monkeypatch):
    A = np.random.rand(64, 32).astype(np.float32)
    B = np.zeros((192, 32), np.float32)
    rows_by_thirds(A, B)
    for bx in range(12):
        issuer = bx - bx % 2
        np.testing.assert_array_equal(B[bx * 16:(bx + 1) * 16],
                                      A[(issuer // 3) * 16:(issuer // 3 + 1) * 16])
    after = _after_cluster_forms(rows_by_thirds, (A, B), tmp_path, monkeypatch)
    assert "A[(__tj_block_index(0) // 2 * 2 + 0) // 3 * block, 0]" in after


@tilejit.kernel
def clamped_rows(A, B, block: T.constexpr = 16):
    """Rows clamped at the tensor's end: ranks 0 and 1 name different rows in every
    cluster of this grid (a sampled check once took them for one region)."""
    with T.ClusterKernel(4, threads=128, cluster_dims=2) as bx:
        A_s = T.alloc_shared((block, 32), A.dtype)
        T.copy_cluster(A[T.min(bx * block, A.shape[0] - block), 0], A_s, cluster_mask=0b11)
        T.copy(A_s, B[bx * block, 0])


def test_a_clamped_region_is_the_issuers(tmp_path, monkeypatch):
    A = np.random.rand(64, 32).astype(np.float32)
    B = np.zeros((64, 32), np.float32)
    clamped_rows(A, B)
    for bx in range(4):
        issuer = bx - bx % 2
        np.testing.assert_array_equal(B[bx * 16:(bx + 1) * 16], A[issuer * 16:issuer * 16 + 16])
    assert "__tj_block_index(0) // 2 * 2 + 0" in _after_cluster_forms(
        clamped_rows, (A, B), tmp_path, monkeypatch)


@tilejit.kernel
def rank_branches(A, B, block: T.constexpr = 16):
    with T.ClusterKernel(4, threads=128, cluster_dims=2) as bx:
        A_s = T.alloc_shared((block, 32), A.dtype)
        if T.block_rank_in_cluster() == 0:
            T.copy_cluster(A[0, 0], A_s, cluster_mask=0b11)
        else:
            T.copy_cluster(A[block, 0], A_s, cluster_mask=0b11)
        T.copy(A_s, B[bx * block, 0])


def test_copies_from_different_statements_are_an_error_in_the_simulator():
    A = np.zeros((64, 32), np.float32)
    with pytest.raises(ValueError, match=r"makes its copy 1 at line \d+, but rank 0, whose "
                                         r"copies the mask's blocks receive, made its copy 1 "
                                         r"at line \d+"):
        rank_branches(A, np.zeros_like(A))


@T.macro
def load_rows(A, A_s, row):
    T.copy_cluster(A[row, 0], A_s, cluster_mask=0b11)


@tilejit.kernel
def copy_in_a_macro(A, B, block: T.constexpr = 16):
    with T.ClusterKernel(4, threads=128, cluster_dims=2) as bx:
        A_s = T.alloc_shared((block, 32), A.dtype)
        load_rows(A, A_s, 0)
        T.copy(A_s, B[bx * block, 0])


@tilejit.kernel
def copy_inline(A, B, block: T.constexpr = 16):
    with T.ClusterKernel(4, threads=128, cluster_dims=2) as bx:
        A_s = T.alloc_shared((block, 32), A.dtype)
        T.copy_cluster(A[0, 0], A_s, cluster_mask=0b11)
        T.copy(A_s, B[bx * block, 0])


def test_a_copy_cluster_in_a_macro_is_the_kernels_own():
    """The macro is inlined (it holds a tile operation the source passes rewrite): the
    same program as the copy written in the kernel, in simulation and in PTX."""
    A = np.random.default_rng(5).standard_normal((64, 32)).astype(np.float32)
    B = np.zeros_like(A)
    copy_in_a_macro(A, B)
    np.testing.assert_array_equal(B, np.tile(A[:16], (4, 1)))
    macro = copy_in_a_macro.compile(A, A.copy(), target="cuda", arch="sm_90a").ptx
    inline = copy_inline.compile(A, A.copy(), target="cuda", arch="sm_90a").ptx
    assert macro.replace("copy_in_a_macro", "k") == inline.replace("copy_inline", "k")


def test_a_shared_source_is_refused():
    @tilejit.kernel
    def from_shared(A, block: T.constexpr = 16):
        with T.ClusterKernel(2, threads=128, cluster_dims=2) as bx:
            S = T.alloc_shared((block, 32), A.dtype)
            D = T.alloc_shared((block, 32), A.dtype)
            T.copy(A[0, 0], S)
            T.copy_cluster(S, D, cluster_mask=0b11)
            T.copy(D, A[bx * block, 0])

    A = np.zeros((64, 32), np.float32)
    with pytest.raises(CompileError, match=r"the source must be a global tensor or a region "
                                           r"of one, got `S`"):
        assert from_shared.compile(A, target="cuda", arch="sm_90a").ptx
    with pytest.raises(CompileError, match=r"the source must be a global tensor"):
        from_shared(A)          # the simulation (the compiler's checks first)


def test_a_region_from_memory_or_a_swizzled_index_is_refused():
    @tilejit.kernel
    def from_memory(A, Offsets, block: T.constexpr = 16):
        with T.ClusterKernel(2, threads=128, cluster_dims=2) as bx:
            A_s = T.alloc_shared((block, 32), A.dtype)
            off = Offsets[bx] + bx
            T.copy_cluster(A[off, 0], A_s, cluster_mask=0b11)
            T.copy(A_s, A[bx * block, 0])

    @tilejit.kernel
    def swizzled(A, block: T.constexpr = 16):
        with T.ClusterKernel(2, 2, threads=128, cluster_dims=2) as (bx, by):
            T.use_swizzle(panel_size=2)
            A_s = T.alloc_shared((block, 32), A.dtype)
            T.copy_cluster(A[bx * block, by], A_s, cluster_mask=0b11)
            T.copy(A_s, A[bx * block, 0])

    A = np.zeros((64, 32), np.float32)
    with pytest.raises(CompileError, match=r"reads `off`, computed from the block index and "
                                           r"memory"):
        assert from_memory.compile(A, np.zeros(2, np.int32), target="cuda", arch="sm_90a").ptx
    with pytest.raises(CompileError, match=r"in a kernel with T.use_swizzle is not supported"):
        assert swizzled.compile(A, target="cuda", arch="sm_90a").ptx


def test_a_region_from_a_loop_over_the_block_index_is_refused():
    @tilejit.kernel
    def looped(A, B, block: T.constexpr = 16):
        with T.ClusterKernel(4, threads=128, cluster_dims=2) as bx:
            A_s = T.alloc_shared((block, 32), A.dtype)
            row = 0
            for _ in range(bx):
                row += block
            T.copy_cluster(A[row, 0], A_s, cluster_mask=0b11)
            T.copy(A_s, B[bx * block, 0])

    A = np.zeros((64, 32), np.float32)
    with pytest.raises(CompileError, match=r"reads `row`, computed from the block index in a "
                                           r"loop or in several assignments"):
        assert looped.compile(A, A, target="cuda", arch="sm_90a").ptx


def test_copy_cluster_the_issuer_skips_is_an_error():
    A = np.zeros((64, 32), np.float32)
    with pytest.raises(ValueError, match="makes copy 1 .* but rank 0, whose copies the mask's "
                                         "blocks receive, made 0"):
        copy_rows(A, A.copy(), np.zeros_like(A), skip=0)


def test_copy_cluster_a_receiver_skips_is_an_error():
    A = np.zeros((64, 32), np.float32)
    with pytest.raises(ValueError, match="rank 0 copied 1 region.* but rank 1 asked for 0"):
        copy_rows(A, A.copy(), np.zeros_like(A), skip=1)


def test_a_block_outside_the_mask_copies_its_own_region():
    A = np.random.rand(64, 32).astype(np.float32)
    B = np.random.rand(64, 32).astype(np.float32)
    C = np.zeros_like(A)
    copy_rows(A, B, C, shift=1, mask=0b01)      # rank 1 is not in the mask: its own rows
    r = np.arange(64)
    want = A + B[(r // 32) * 16 + r % 16 + (r // 16) % 2]
    np.testing.assert_allclose(C, want, rtol=1e-6)


@pytest.mark.parametrize("mask,match", [(0b111, "names ranks beyond the cluster's 2"),
                                        (0, "expected a positive int")])
def test_bad_masks_are_errors(mask, match):
    A = np.zeros((64, 32), np.float32)
    with pytest.raises((CompileError, ValueError), match=match):
        copy_rows(A, A.copy(), np.zeros_like(A), mask=mask)


def test_cluster_dims_are_checked():
    R = np.zeros((6, 4), np.int32)
    with pytest.raises(ValueError, match=r"grid extent 0 \(x\) is 6, not a multiple of "
                                         r"cluster_dims\[0\] = 4"):
        ranks(R, R.copy(), cx=4, cy=1)
    with pytest.raises(ValueError, match="16 blocks per cluster, more than the 8"):
        ranks(np.zeros((4, 4), np.int32), np.zeros((4, 4), np.int32), cx=4, cy=4)


def test_copies_between_blocks_are_not_built():
    @tilejit.kernel
    def k(A):
        with T.ClusterKernel(2, threads=32, cluster_dims=2):
            A_s = T.alloc_shared((32,), A.dtype)
            T.copy_cluster(A[0], A_s, dst_block=1)

    with pytest.raises((CompileError, NotImplementedError), match="dst_block"):
        k(np.zeros(32, np.float32))


def test_multicast_gemm_simulated_against_float64():
    a = torch.randn(320, 160, dtype=torch.float16)      # the last cluster's rank 1 past M
    b = torch.randn(160, 384, dtype=torch.float16)
    c = torch.empty(320, 384, dtype=torch.float16)
    matmul_multicast(a, b, c, sms=4, block_K=32)
    torch.testing.assert_close(c.double(), reference(a, b).double(), rtol=2e-3, atol=2e-2)


def _gemm_ptx(arch, **kw):
    a, b = np.zeros((512, 512), np.float16), np.zeros((512, 512), np.float16)
    return matmul_multicast.compile(a, b, np.zeros((512, 512), np.float16), target="cuda",
                                    arch=arch, **kw).ptx


def test_sm90a_multicasts_b_and_releases_stages_across_the_cluster(ptxas):
    ptx = _gemm_ptx("sm_90a")
    # B's 64 x 256 tile: 4 boxes of 64 columns (128-byte swizzle), each issued by one rank
    assert ptx.count("multicast::cluster") == 4
    assert ptx.count("mapa.shared::cluster") == 2        # a stage released in both blocks
    assert ptx.count("barrier.cluster.arrive") == 2      # after the init, before the exit
    assert "%cluster_ctarank" in ptx and "setmaxnreg" in ptx and "wgmma.mma_async" in ptx
    ptxas(ptx, "sm_90a")


def test_cluster_of_four(ptxas):
    ptx = _gemm_ptx("sm_90a", cluster=4, sms=128)
    assert ptx.count("multicast::cluster") == 4 and ptx.count("mapa.shared::cluster") == 4
    ptxas(ptx, "sm_90a")


def test_without_warp_specialization_each_block_loads_its_own(ptxas):
    ptx = _gemm_ptx("sm_90")            # TMA, no wgmma: the one-program pipeline
    assert "multicast::" not in ptx and "mapa" not in ptx and "barrier.cluster" not in ptx
    assert "%cluster_ctarank" in ptx
    ptxas(ptx, "sm_90")


def test_clusters_before_sm90_are_a_compile_error():
    with pytest.raises(CompileError, match="thread block clusters need sm_90 or newer"):
        _gemm_ptx("sm_80")


# -- on the GPU -----------------------------------------------------------------------

@pytest.mark.gpu
def test_rank_on_gpu_against_simulator():
    R = torch.full((4, 6), -1, dtype=torch.int32, device="cuda")
    G = torch.zeros((4, 6), dtype=torch.int32, device="cuda")
    ranks(R, G, cx=2, cy=3)
    R_sim, G_sim = np.zeros((4, 6), np.int32), np.zeros((4, 6), np.int32)
    ranks_sim(R_sim, G_sim, cx=2, cy=3)
    np.testing.assert_array_equal(R.cpu().numpy(), _rank_ref(4, 6, 2, 3))
    np.testing.assert_array_equal(R.cpu().numpy(), R_sim)


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [2, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_multicast_gemm_on_gpu_against_float64_and_simulator(cluster, dtype):
    g = torch.Generator().manual_seed(cluster)
    a = torch.randn(1000, 704, generator=g).to(dtype)
    b = torch.randn(704, 1500, generator=g).to(dtype)
    c = torch.full((1000, 1500), float("nan"), dtype=dtype, device="cuda")
    matmul_multicast(a.cuda(), b.cuda(), c, sms=128, cluster=cluster)
    ref = a.double() @ b.double()
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(c.cpu().double(), ref, rtol=tol, atol=tol * 30)
    a_s, b_s = a[:320, :128], b[:128, :512]
    c_sim = torch.empty(320, 512, dtype=dtype)
    tilejit.kernel(matmul_multicast.func, target="sim")(
        a_s, b_s, c_sim, sms=8, cluster=cluster)
    c_gpu = torch.empty(320, 512, dtype=dtype, device="cuda")
    matmul_multicast(a_s.cuda(), b_s.cuda(), c_gpu, sms=8, cluster=cluster)
    torch.testing.assert_close(c_gpu.cpu().double(), c_sim.double(), rtol=tol, atol=tol * 4)


@pytest.mark.gpu
def test_cached_cluster_launches_take_the_fast_path():
    a = torch.randn(512, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 512, dtype=torch.float16, device="cuda")
    c = torch.empty(512, 512, dtype=torch.float16, device="cuda")
    for _ in range(3):          # the first call records the launch, the others replay it
        a.normal_()
        matmul_multicast(a, b, c, sms=16)
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=5e-2)
    assert matmul_multicast._fast is not None and matmul_multicast._fast.table


@pytest.mark.gpu
@pytest.mark.parametrize("shift", [0, 1])
def test_copy_cluster_on_gpu_against_simulator(shift):
    """shift 1: rank 1 names other rows and receives rank 0's, as in the simulator."""
    A = torch.rand(64, 32, device="cuda")
    B = torch.rand(64, 32, device="cuda")
    C = torch.zeros_like(A)
    copy_rows(A, B, C, shift=shift)
    np.testing.assert_allclose(C.cpu().numpy(), _rows_ref(A.cpu().numpy(), B.cpu().numpy()),
                               rtol=1e-6)
    sim = np.zeros((64, 32), np.float32)
    copy_rows(A.cpu().numpy(), B.cpu().numpy(), sim, shift=shift)
    np.testing.assert_allclose(C.cpu().numpy(), sim, rtol=1e-6)


def _barriers(A, relaxed: T.constexpr = False):
    n, = A.shape
    with T.ClusterKernel(n, threads=64, cluster_dims=4) as bx:
        if relaxed:
            T.cluster_arrive_relaxed()
        else:
            T.cluster_arrive()
        T.cluster_wait()
        rank = T.block_rank_in_cluster()
        if T.get_thread_binding() == 0:
            A[bx] = rank
        T.cluster_sync()


barriers = tilejit.kernel(_barriers)


def test_cluster_barrier_simulated():
    A = np.full(16, -1, np.int32)
    barriers(A)
    np.testing.assert_array_equal(A, np.arange(16) % 4)


@pytest.mark.parametrize("relaxed", [False, True])
def test_cluster_barrier_ptx(relaxed, ptxas):
    ptx = barriers.compile(np.zeros(16, np.int32), target="cuda", arch="sm_90a",
                           relaxed=relaxed).ptx
    arrive = "barrier.cluster.arrive.relaxed;" if relaxed else "barrier.cluster.arrive.release;"
    assert arrive in ptx and ptx.count("barrier.cluster.wait.acquire;") == 2
    ptxas(ptx, "sm_90a")


def test_cluster_barrier_before_sm90_is_a_compile_error():
    with pytest.raises(CompileError, match="sm_90 or newer"):
        barriers.compile(np.zeros(16, np.int32), target="cuda", arch="sm_80")


@pytest.mark.gpu
def test_cluster_barrier_on_gpu():
    A = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    barriers(A)
    assert torch.equal(A.cpu(), torch.arange(128, dtype=torch.int32) % 4)


def multicast_demo(M, N, block_M=128, block_N=64, mask=0b0011):
    """TileLang's multicast demo: of four blocks, ranks 0 and 1 in the mask (rank 1
    receives rank 0's tile), ranks 2 and 3 load their own."""
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.ClusterKernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128,
                             cluster_dims=(4, 1, 1)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), "float16")
            T.copy_cluster(A[by * block_M, bx * block_N], A_shared, cluster_mask=mask)
            T.copy(A_shared, B[by * block_M, bx * block_N])
    return kernel


def _demo_ref(A, block_M=128, block_N=64):
    ref = A.clone()
    for c0 in range(0, A.shape[1], 4 * block_N):     # rank 1 of each cluster: rank 0's tile
        ref[:, c0 + block_N:c0 + 2 * block_N] = A[:, c0:c0 + block_N]
    return ref


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_tilelangs_multicast_demo(device):
    A = torch.randn(256, 512, dtype=torch.float16, device=device)
    B = tilejit.compile(multicast_demo(256, 512), out_idx=[1],
                        target="sim" if device == "cpu" else "cuda")(A)
    torch.testing.assert_close(B.cpu(), _demo_ref(A.cpu()), rtol=0, atol=0)


"""Warp specialization (passes/warp_specialize.py): on sm_90a a TMA pipeline feeding a
gemm on wgmma gets a producer warpgroup, full/empty mbarriers and setmaxnreg; elsewhere
the program stays one for all threads. The results on the device are checked by the
GPU tests of tests/language/test_gemm_wgmma.py and test_gemm.py (their pipelines are
warp-specialized on an H100/H200)."""
import re

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from kernels import gemm


def _compiled(arch="sm_90a", threads=256, **kw):
    a = np.zeros((512, 512), np.float16)
    c = np.zeros((512, 512), np.float32)
    cfg = dict(block_M=128, block_N=256, block_K=64, threads=threads, stages=3)
    cfg.update(kw)
    return gemm.compile(a, a.copy(), c, target="cuda", arch=arch, **cfg).compiled


def test_a_wgmma_pipeline_gets_a_producer_warpgroup(ptxas):
    k = _compiled()
    ptx = k.ptx
    assert k.block_threads == 384
    assert ".maxntid 384" in ptx and ".minnctapersm 1" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    # S full mbarriers (two TMA arrivals each) and S empty ones (one per consumer warp)
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6
    assert "mbarrier.arrive.shared::cta.b64" in ptx
    # one block barrier (after the mbarrier initialization); none in the K loop
    assert len(re.findall(r"bar\.sync\s+0;", ptx)) == 1
    report = ptxas(ptx, "sm_90a")
    assert "C7508" not in report and "setmaxnreg" not in report   # not ignored
    assert "0 bytes spill stores" in report


def test_consumer_barriers_are_named_and_count_the_consumers_only():
    ptx = _compiled(threads=128, block_M=64, block_N=128).ptx
    assert ".maxntid 256" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    for m in re.findall(r"bar\.sync\s+(\d+)(?:,\s*(\d+))?;", ptx):
        assert m in (("0", ""), ("1", "128")), m


@pytest.mark.parametrize("arch,env", [("sm_90", {}), ("sm_90a", {"TILEJIT_WS": "0"}),
                                      ("sm_90a", {"TILEJIT_WGMMA": "0"})])
def test_no_specialization_without_wgmma_or_when_turned_off(arch, env, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    k = _compiled(arch=arch)
    assert k.block_threads == 0 and "setmaxnreg" not in k.ptx and ".maxntid 256" in k.ptx


@tilejit.kernel
def gemm_fixed_registers(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 256,
                         block_K: T.constexpr = 64, spelling: T.constexpr = "no_set_max_nreg"):
    """The warp-specialized GEMM with TileLang's switch that keeps the launch's
    registers (``T.no_set_max_nreg()`` or ``T.disable_warp_group_reg_alloc()``)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        if spelling == "no_set_max_nreg":
            T.no_set_max_nreg()
        else:
            T.disable_warp_group_reg_alloc()
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


def _fixed_inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 192, generator=g).half()
    b = torch.randn(192, 512, generator=g).half()
    return a.to(device), b.to(device), torch.zeros(256, 512, device=device)


@pytest.mark.parametrize("spelling", ["no_set_max_nreg", "disable_warp_group_reg_alloc"])
def test_no_set_max_nreg_keeps_the_launched_registers(spelling, ptxas):
    a, b, c = (x.numpy() for x in _fixed_inputs())
    k = gemm_fixed_registers.compile(a, b, c, spelling=spelling, target="cuda",
                                     arch="sm_90a").compiled
    assert k.block_threads == 384 and "mbarrier.arrive" in k.ptx   # still specialized
    assert "setmaxnreg" not in k.ptx
    ptxas(k.ptx, "sm_90a")
    gemm_fixed_registers(a, b, c, spelling=spelling)                # the simulator
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_no_set_max_nreg_on_the_gpu_against_torch_and_the_simulator():
    a, b, c = _fixed_inputs("cuda")
    gemm_fixed_registers(a, b, c)
    sim = np.zeros((256, 512), np.float32)
    gemm_fixed_registers(a.cpu().numpy(), b.cpu().numpy(), sim)
    ref = a.double().cpu() @ b.double().cpu()
    torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(c.cpu().numpy(), sim, rtol=1e-5, atol=1e-4)


# -- a reduction across warps inside the consumers (TileLang's MLA decode example hung) ----
def row_softmax_sums(block_H=64, block_N=64, dim=128, n_blocks=16):
    """Per row of Q·Kᵀ over ``n_blocks`` pipelined key blocks: the running max of each
    block's scores and Σ exp2(s − max). With ``FullCol`` the 8 warps split the columns, so
    each row's max and sum cross warps through shared memory, inside the consumers of a
    warp-specialized pipeline longer than its stages."""
    @T.prim_func
    def main(Q: T.Tensor((block_H, dim), "float16"),
             K: T.Tensor((block_N * n_blocks, dim), "float16"),
             Out: T.Tensor((block_H,), "float32")):
        with T.Kernel(1, threads=256):
            Q_s = T.alloc_shared((block_H, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            s = T.alloc_fragment((block_H, block_N), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            total = T.alloc_fragment((block_H,), "float32")
            part = T.alloc_fragment((block_H,), "float32")
            T.copy(Q, Q_s)
            T.fill(total, 0)
            for k in T.Pipelined(n_blocks, num_stages=2):
                T.copy(K[k * block_N, 0], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(block_H, block_N):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * 0.0625)
                T.reduce_sum(s, part, dim=1)
                for i in T.Parallel(block_H):
                    total[i] += part[i]
            T.copy(total, Out)
    return main


def _row_softmax_sums_reference(q, k, block_N=64):
    s = (q.double() @ k.double().T).reshape(q.shape[0], -1, block_N)
    return torch.exp2((s - s.amax(-1, keepdim=True)) * 0.0625).sum(-1).sum(-1)


def test_a_reduction_inside_the_consumers_waits_for_the_consumers_only(ptxas):
    ptx = tilejit.compile(row_softmax_sums(), target="cuda -arch=sm_90a").get_kernel_source()
    assert "setmaxnreg.inc" in ptx              # warp-specialized
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    # every barrier of the consumers (the reductions' exchanges included) is named
    # barrier 1 of their 256 threads: barrier 0 would wait for the producer
    barriers = re.findall(r"(?:bar|barrier)\.sync\s+(\d+)(?:,\s*(\d+))?;", consumers)
    assert len(barriers) >= 4 and set(barriers) == {("1", "256")}, barriers
    ptxas(ptx, "sm_90a")


def test_a_reduction_inside_the_consumers_simulated():
    q, k = torch.randn(64, 128).half(), torch.randn(64 * 16, 128).half()
    out = tilejit.compile(row_softmax_sums(), out_idx=-1, target="sim")(q, k)
    torch.testing.assert_close(out.double(), _row_softmax_sums_reference(q, k), rtol=2e-3,
                               atol=1e-2)


@pytest.mark.gpu
def test_a_reduction_inside_the_consumers_on_the_gpu():
    q, k = torch.randn(64, 128).half(), torch.randn(64 * 16, 128).half()
    kernel = tilejit.compile(row_softmax_sums(), out_idx=-1)
    out = kernel(q.cuda(), k.cuda())
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu().double(), _row_softmax_sums_reference(q, k),
                               rtol=2e-3, atol=1e-2)
    torch.testing.assert_close(out.cpu(), kernel(q, k), rtol=1e-4, atol=1e-3)


# -- a reduction inside a kernel's own T.ws role --------------------------------------------
@tilejit.kernel
def role_reduction(A, B, stages: T.constexpr = 2):
    N, R, D = A.shape
    with T.Kernel(1, threads=256):
        buf = T.alloc_shared((stages, R, D), A.dtype)
        out = T.alloc_fragment((R, D), A.dtype)
        red = T.alloc_fragment((D,), A.dtype)
        bars = T.alloc_barrier([128] * (2 * stages))
        for k in T.serial(N):
            with T.ws(1):
                T.mbarrier_wait_parity(bars[k % stages + stages], ((k // stages) & 1) ^ 1)
                T.tma_copy(A[k, 0:R, 0:D], buf[k % stages, :, :], barrier=bars[k % stages])
                T.mbarrier_arrive(bars[k % stages])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[k % stages], (k // stages) & 1)
                T.copy(buf[k % stages, :, :], out)
                T.mbarrier_arrive(bars[k % stages + stages])
                T.reduce_sum(out, red, dim=0)
                T.copy(red, B[k, 0:D])


def test_a_reduction_inside_a_role_waits_for_its_role_only(ptxas):
    # (a review's finding: the exchange between warps waited on barrier 0, which the
    # other role, spinning on its mbarrier, never reaches: the MLA example's hang)
    a = np.random.default_rng(0).random((6, 128, 16)).astype(np.float32)
    b = np.zeros((6, 16), np.float32)
    tilejit.kernel(role_reduction.func, target="sim")(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    ptx = role_reduction.compile(a, b, target="cuda", arch="sm_90a").ptx
    body = ptx[ptx.index("mbarrier.try_wait"):]
    barriers = re.findall(r"(?:bar|barrier)\.sync\s+(\w+)(?:,\s*(\d+))?;", body)
    assert barriers and all(count == "128" for _, count in barriers), barriers
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_a_reduction_inside_a_role_on_the_gpu():
    import torch
    a = torch.rand(12, 128, 16, device="cuda")
    b = torch.zeros(12, 16, device="cuda")
    role_reduction(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a.sum(1), rtol=1e-5, atol=1e-5)


@tilejit.kernel
def gemm_serpentine(A, B, C, impure: T.constexpr = 0, block_M: T.constexpr = 128,
                    block_N: T.constexpr = 128, block_K: T.constexpr = 64,
                    threads: T.constexpr = 256, stages: T.constexpr = 3):
    """Odd rows of blocks walk the columns backwards: the block index is remapped under
    an ``if`` before the pipeline, which the producer warpgroup must run too (it loads
    the remapped tiles); ``impure``: the ``if`` also clears a tile, so the producer
    cannot run it and the kernel is not warp-specialized."""
    M, K = A.shape
    N = B.shape[1]
    nbx = T.ceildiv(N, block_N)
    with T.Kernel(nbx, T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        if by % 2 == 1:
            bx = nbx - 1 - bx
            if impure:
                T.clear(C_f)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


def test_a_remap_of_the_block_index_before_the_pipeline_is_the_producers_too(tmp_path,
                                                                             monkeypatch):
    """The producer used to run only the plain assignments before the pipeline: a block
    index changed under an ``if`` was the consumers' alone, and the producer loaded other
    tiles than the consumers waited for (a hang on the GPU)."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    a = np.zeros((512, 512), np.float16)
    k = gemm_serpentine.compile(a, a.copy(), np.zeros((512, 512), np.float32),
                                target="cuda", arch="sm_90a").compiled
    assert k.block_threads == 384                       # warp-specialized
    after = next(tmp_path.glob("*/*_after_specialize_warps.py")).read_text()
    producer = after[after.index("if __tj_ws_producer():"):after.index("    else:")]
    assert "if by % 2 == 1:" in producer and "bx = nbx - 1 - bx" in producer
    impure = gemm_serpentine.compile(a, a.copy(), np.zeros((512, 512), np.float32),
                                     impure=1, target="cuda", arch="sm_90a").compiled
    assert impure.block_threads == 0                    # not specialized: still correct


def test_the_remapped_gemm_in_the_simulator():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128)).astype(np.float16)
    b = rng.standard_normal((128, 384)).astype(np.float16)
    c = np.zeros((256, 384), np.float32)
    tilejit.kernel(gemm_serpentine.func, target="sim")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("impure", [0, 1])
def test_the_remapped_gemm_on_the_gpu(impure):
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 640, device="cuda", dtype=torch.float16)
    c = torch.zeros(512, 640, device="cuda")
    gemm_serpentine(a, b, c, impure=impure)
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("consumers, budget", [(1, 240), (2, 240), (3, 160), (4, 112)])
def test_the_consumers_budget_fits_the_blocks_registers_at_launch(consumers, budget):
    # setmaxnreg moves registers within the block's launch allocation (64 K spread over
    # its threads, producer included, in units of 8): more than that never comes
    from tilejit.passes.warp_specialize import PRODUCER_REGISTERS, _consumer_registers
    threads = 128 * consumers
    assert _consumer_registers(threads) == budget
    launch = 65536 // (threads + 128) // 8 * 8
    assert PRODUCER_REGISTERS * 128 + budget * threads <= min(launch, 255) * (threads + 128)


def _four_warpgroup_gemm():
    # TileLang's issue 2522: 512 threads, FullRow on a 128 x 256 block: two warpgroups
    # along M, two along N; its consumers' setmaxnreg.inc asked 120 and hung on the H200
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 256), "float16"),
             C: T.Tensor((128, 256), "float16")):
        with T.Kernel(1, 1, threads=512) as (bx, by):
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 256), "float16")
            C_frag = T.alloc_fragment((128, 256), "float32")
            T.clear(C_frag)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], A_shared)
                T.copy(B[k * 32, 0], B_shared)
                T.gemm(A_shared, B_shared, C_frag, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_frag, C[0, 0])
    return main


def _four_warpgroup_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, 3, (128, 64), generator=g).half(),
            torch.randint(0, 3, (64, 256), generator=g).half())


def test_four_consumer_warpgroups_ask_what_the_block_holds(ptxas):
    a, b = _four_warpgroup_inputs()
    kernel = tilejit.compile(_four_warpgroup_gemm())
    ptx = kernel.kernel.compile(a.numpy(), b.numpy(), np.zeros((128, 256), np.float16),
                                target="cuda", arch="sm_90a").ptx
    assert ".maxntid 640" in ptx and "setmaxnreg.inc.sync.aligned.u32 112;" in ptx
    ptxas(ptx, "sm_90a")
    c = torch.zeros(128, 256, dtype=torch.float16)
    kernel(a, b, c)
    assert torch.equal(c.float(), a.float() @ b.float())


@pytest.mark.gpu
def test_four_consumer_warpgroups_on_the_gpu():
    a, b = _four_warpgroup_inputs()
    c = torch.zeros(128, 256, dtype=torch.float16, device="cuda")
    tilejit.compile(_four_warpgroup_gemm())(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    assert torch.equal(c.cpu().float(), a.float() @ b.float())


def three_warpgroup_gemm(M=192, N=256, K=128):
    """Three consumer warpgroups with 128-word accumulators (192 x 256 over 384 threads):
    a producer warpgroup would make the block 512 threads, whose 128 registers a thread
    cannot hold a wgmma on such an accumulator (ptxas refused the kernel)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 192), threads=384) as (bx, by):
            A_s = T.alloc_shared((192, 64), T.float16)
            B_s = T.alloc_shared((64, 256), T.float16)
            C_f = T.alloc_fragment((192, 256), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 192, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 192, bx * 256])
    return main


def test_no_producer_warpgroup_where_it_would_starve_the_accumulators(ptxas):
    ptx = tilejit.compile(three_warpgroup_gemm(), out_idx=[2],
                          target="cuda -arch=sm_90a").get_kernel_source()
    assert ".maxntid 384" in ptx and "setmaxnreg" not in ptx
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_no_producer_warpgroup_where_it_would_starve_the_accumulators_on_the_gpu():
    a = torch.randint(-2, 3, (192, 128)).half()
    b = torch.randint(-2, 3, (128, 256)).half()
    c = tilejit.compile(three_warpgroup_gemm(), out_idx=[2])(a.cuda(), b.cuda())
    torch.testing.assert_close(c.cpu(), a.float() @ b.float())

"""Warp specialization (passes/warp_specialize.py): on sm_90a a TMA pipeline feeding a
gemm on wgmma gets a producer warpgroup, full/empty mbarriers and setmaxnreg; elsewhere
the program stays one for all threads. The results on the device are checked by the
GPU tests of tests/language/test_gemm_wgmma.py and test_gemm.py (their pipelines are
warp-specialized on an H100/H200)."""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from kernels import gemm


@tilejit.kernel
def gemm_relu_each_step(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
                        block_K: T.constexpr = 64):
    """A pipelined gemm whose loop also reads the accumulator (clamps it at each step)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = T.max(C_f[i, j], 0.0)
        T.copy(C_f, C[by * block_M, bx * block_N])


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
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
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


def test_the_consumers_keep_one_gemm_in_flight(ptxas):
    """The k loop's gemm waits only for the gemm before it (wait_group 1) and releases
    that one's stage; after the loop wait_group 0 completes the last one. ptxas keeps
    the wgmma pipeline (no serialization warning)."""
    ptx = _compiled().ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert "wgmma.wait_group.sync.aligned 0;" in ptx
    # every release arrives only after a wait_group
    body = ptx[ptx.index("wgmma.fence.sync.aligned"):]
    first_arrive = body.index("mbarrier.arrive.shared::cta.b64")
    assert "wgmma.wait_group" in body[:first_arrive]
    report = ptxas(ptx, "sm_90a")
    assert "C7515" not in report and "serialized" not in report


def test_a_loop_that_reads_the_accumulator_waits_for_each_gemm():
    """Anything besides the gemm in the consumers' loop (here the accumulator is read)
    keeps wait_group 0: the gemm's registers are final when it returns."""
    a = np.zeros((512, 512), np.float16)
    k = gemm_relu_each_step.compile(a, a.copy(), np.zeros((512, 512), np.float32),
                                    target="cuda", arch="sm_90a").compiled
    assert k.block_threads == 256       # warp-specialized all the same
    assert "wgmma.wait_group.sync.aligned 1;" not in k.ptx
    assert "wgmma.wait_group.sync.aligned 0;" in k.ptx

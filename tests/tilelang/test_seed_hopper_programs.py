"""Seed 000's Hopper listings with only their imports changed (tests/programs/): the
persistent GEMM (T.Persistent, driver.get_num_sms) in simulation and, with ``-m gpu``,
on the device against torch in float64 and against the simulator; the warp-specialized
GEMM (T.ws, mbarriers, T.tma_copy) in simulation."""
import pytest
import torch

import tilejit
from tilejit.carver.arch import driver
from tilejit.sim.runtime import UninitializedReadError


def _close(actual, ref, tol):
    """`actual` against a float64 reference, to `tol` relative to the reference's size."""
    err = (actual.double() - ref).abs().max().item()
    assert err < tol * (1 + ref.abs().max().item()), err


def _persistent(monkeypatch, sms, *sizes):
    """The seed's factory run with ``driver.get_num_sms()`` answering ``sms`` (None: the
    machine's), compiled as TileLang's @tilelang.jit(out_idx=[-1]) would."""
    from matmul_persistent_seed000 import matmul_persistent
    if sms is not None:
        monkeypatch.setattr(driver, "get_num_sms", lambda device_id=0, simulated=None: sms)
    return tilejit.compile(matmul_persistent.__wrapped__(*sizes), out_idx=[-1])


# M, N, K not multiples of the 64×64×32 block; SM counts that leave the last wave short
@pytest.mark.parametrize("sms", [1, 3, 7, None])
def test_persistent_gemm_simulated(monkeypatch, sms):
    M, N, K = 200, 136, 72
    kernel = _persistent(monkeypatch, sms, M, N, K, 64, 64, 32, 128, 2)
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    _close(kernel(a, b), a.double() @ b.double(), 1e-2)


def test_persistent_gemm_factory_as_the_seed_calls_it():
    from matmul_persistent_seed000 import matmul_persistent
    kernel = matmul_persistent(130, 70, 40, 64, 64, 32, 128, 2)   # sm_num: the machine's
    a = torch.randn(130, 40, dtype=torch.float16)
    b = torch.randn(40, 70, dtype=torch.float16)
    _close(kernel(a, b), a.double() @ b.double(), 1e-2)


def _answering(monkeypatch, sms):
    """``driver.get_num_sms()`` answers ``sms``: the machine has no GPU, and the
    simulator's count is ``sms`` (the kernel reads the same function throughout)."""
    monkeypatch.setattr(driver._cuda_driver, "cuda_available", lambda: False)
    monkeypatch.setattr(driver, "SIMULATED_NUM_SMS", sms)


def test_persistent_gemm_eager_style_asks_the_sm_count_per_specialization(monkeypatch):
    from matmul_persistent_seed000_eager import matmul_persistent
    a = torch.randn(200, 72, dtype=torch.float16)
    b = torch.randn(72, 136, dtype=torch.float16)
    before = {spec for spec, _ in matmul_persistent.kernel._cache}   # other tests' calls
    for sms in (3, 5):
        _answering(monkeypatch, sms)
        _close(matmul_persistent(a, b, 64, 64, 32, 128, 2), a.double() @ b.double(), 1e-2)
    specs = [spec for spec, _ in matmul_persistent.kernel._cache if spec not in before]
    assert sorted(v for spec in specs for n, v in spec.constexprs
                  if n.startswith("__tj_host_")) == [3, 5]


@pytest.mark.gpu
def test_persistent_gemm_eager_style_gpu():
    from matmul_persistent_seed000_eager import matmul_persistent
    a = torch.randn(1000, 520, dtype=torch.float16, device="cuda")
    b = torch.randn(520, 1512, dtype=torch.float16, device="cuda")
    c = matmul_persistent(a, b, 128, 128, 32, 128, 3)
    _close(c.cpu(), a.double().cpu() @ b.double().cpu(), 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(2000, 2056, 1000),     # rows 16-byte aligned: TMA on sm_90
                                   (1000, 1500, 520)])     # unaligned rows: cp.async
def test_persistent_gemm_gpu(monkeypatch, M, N, K):
    kernel = _persistent(monkeypatch, None, M, N, K, 128, 128, 32, 128, 3)
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = kernel(a, b)
    torch.cuda.synchronize()
    _close(c.cpu(), a.double().cpu() @ b.double().cpu(), 1e-2)
    simulated = kernel(a.cpu(), b.cpu())       # the same kernel (same sm_num) simulated
    _close(c.cpu(), simulated.double(), 2e-3)


def test_ws_gemm_as_written_reads_c_local_before_writing_it():
    """The seed's listing never clears C_local: the first T.gemm accumulates into
    registers nothing wrote (garbage on the GPU); the simulator names the tile and line."""
    import matmul_ws_seed000
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(UninitializedReadError, match=r"C_local\[0, 0\] is read before it is "
                                                     r"written \(fragment tile C_local") as info:
        matmul_ws_seed000.matmul_ws(a, b, 64, 64, 32)
    path = matmul_ws_seed000.__file__
    line = next(n for n, text in enumerate(open(path), 1) if "T.gemm(A_shared[ko" in text)
    assert f'File "{path}", line {line}' in str(info.value)


@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (200, 136, 72), (64, 64, 320)])
def test_ws_gemm_simulated(M, N, K):
    from matmul_ws_seed000_cleared import matmul_ws_cleared
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    _close(matmul_ws_cleared(a, b, 64, 64, 32), a.double() @ b.double(), 1e-2)


def test_ws_gemm_ptx_on_hopper(ptxas):
    """On sm_90a the listing's own roles, mbarriers and TMA copies: wgmma in warpgroup 0,
    the loads issued by warpgroup 1's first thread (expect_tx, no arrival), every
    thread's arrivals, the stacked tiles as stages (tests/programs/matmul_ws_seed000)."""
    import numpy as np
    from matmul_ws_seed000_cleared import matmul_ws_cleared
    a, b = np.zeros((1024, 512), np.float16), np.zeros((512, 1024), np.float16)
    compiled = matmul_ws_cleared.compile(a, b, block_M=128, block_N=128, block_K=64,
                                         arch="sm_90a", target="cuda")
    ptx = compiled.get_kernel_source()
    for must in ("wgmma.mma_async.sync.aligned.m64n128k16", "mbarrier.expect_tx",
                 "cp.async.bulk.tensor.2d.shared::cluster.global", "mbarrier.try_wait.parity",
                 "mbarrier.arrive.shared::cta.b64 _,", "mbarrier.init"):
        assert must in ptx, must
    assert "mbarrier.arrive.expect_tx" not in ptx      # the role's 128 arrivals count
    assert compiled.handle.compiled.block_threads == 256
    # two stages of A and B, the epilogue's staging tile (T.empty's C stored by TMA), and
    # four mbarriers
    assert compiled.handle.compiled.shared_bytes == 2 * 2 * 128 * 64 * 2 + 128 * 128 * 2 + 4 * 8
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    ptxas(ptx, "sm_90a")


def test_ws_gemm_needs_tma_with_the_line():
    import numpy as np
    from matmul_ws_seed000_cleared import matmul_ws_cleared
    a = np.zeros((128, 64), np.float16)
    with pytest.raises(tilejit.CompileError, match=r"T.alloc_barrier needs Hopper's TMA and "
                                                   r"mbarrier waits \(sm_90 or newer\); the "
                                                   r"target is sm_80") as info:
        matmul_ws_cleared.compile(a, a.T.copy(), block_M=64, block_N=64, block_K=32,
                                  arch="sm_80", target="cuda")
    assert "T.alloc_barrier([128, 128] * num_stages)" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,blocks", [(1024, 1024, 512, (128, 128, 64)),
                                          (1000, 776, 520, (128, 128, 64)),   # edges: TMA fills
                                          (512, 384, 320, (64, 64, 32))])
def test_ws_gemm_gpu(M, N, K, blocks):
    """The listing on the H200 against torch in float64 and against the simulator."""
    from matmul_ws_seed000_cleared import matmul_ws_cleared
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = matmul_ws_cleared(a, b, *blocks)
    torch.cuda.synchronize()
    ref = a.double().cpu() @ b.double().cpu()
    _close(c.cpu(), ref, 1e-2)
    if M * N * K <= 1 << 27:
        simulated = matmul_ws_cleared(a.cpu(), b.cpu(), *blocks)
        _close(c.cpu(), simulated.double(), 2e-3)

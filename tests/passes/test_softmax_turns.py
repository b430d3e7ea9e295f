"""The consumer warpgroups' turns at their exponentials (``passes/softmax_turns.py``):
the seed FlashAttention kernel with two consumer warpgroups (128×128 blocks, 256
threads) on sm_90a waits for its turn before the exp2s and hands it over after them,
before the row sums' shuffles; ptxas keeps every exp2 (MUFU.EX2) between the two
barriers; three warpgroups, the switch off and other kernels have no turns. On the
GPU the output is the same bit for bit with and without turns, and matches SDPA and
the simulator."""
import os
import re
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.runtime.kernel import KernelFunction

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                "flash_attention"))
from flash_attn import flashattn, reference  # noqa: E402

TURNS = KernelFunction(flashattn.func, fast_math=True)
NO_TURNS = KernelFunction(flashattn.func, fast_math=True, switches={"softmax_turns": False})
TWO = dict(block_M=128, block_N=128, threads=256, num_stages=2)
THREE = dict(block_M=192, block_N=96, threads=384, num_stages=2)


def _ptx(kernel, cfg, causal=False, dtype=np.float16):
    q = np.zeros((2, 1024, 4, 128), dtype)
    return kernel.compile(q, q, q, q, is_causal=causal, target="cuda", arch="sm_90a",
                          **cfg).ptx


@pytest.mark.parametrize("causal", [False, True])
def test_two_consumer_warpgroups_take_turns(causal, ptxas):
    ptx = _ptx(TURNS, TWO, causal)
    assert ptx.count("bar.arrive 2, 256;") == 1         # warpgroup 1 gives the first turn
    assert ptx.count("bar.sync 2, 256;") == 1           # warpgroup 0 takes the last one
    assert len(re.findall(r"bar\.sync %r\d+, 256;", ptx)) == 1       # its turn
    assert ptx.count("bar.arrive tjt, 256;") == 1       # the handover
    report = ptxas(ptx, "sm_90a")
    assert "0 bytes spill stores" in report


@pytest.mark.parametrize("causal", [False, True])
def test_every_exponential_stays_inside_the_turn(causal, sass):
    """What the turn is for: ptxas left alone sinks the exp2s below the handover."""
    code = sass(_ptx(TURNS, TWO, causal), "sm_90a")
    lines = [line for line in code.splitlines() if "MUFU.EX2" in line or "BAR." in line]
    start = next(i for i, line in enumerate(lines) if re.search(r"BAR\.SYNC\S* R\d+", line))
    end = next(i for i, line in enumerate(lines) if re.search(r"BAR\.ARV R\d+", line))
    inside = sum("MUFU.EX2" in line for line in lines[start:end])
    total = sum("MUFU.EX2" in line for line in lines)
    # 64 scores a thread (a 64x128 tile over 128 threads) and the two rows' correction
    # factors; the epilogue's and the LSE's log2 are no MUFU.EX2
    assert inside == total == 66, (inside, total)
    # the row sums' four shuffles come after the handover (ptxas may hoist one): their
    # latency is not the turn's
    shuffles = [line for line in code.splitlines()
                if "SHFL.BFLY" in line or "BAR.ARV R" in line]
    arrive = next(i for i, line in enumerate(shuffles) if "BAR.ARV R" in line)
    assert len(shuffles) - 1 - arrive >= 2


def test_a_plain_handover_lets_ptxas_sink_the_exponentials(sass):
    """Why the handover's id depends on the row sums: the same PTX with the id moved
    into the barrier register as it is (no dependence) gets the exp2s after it."""
    ptx = _ptx(TURNS, TWO)
    plain, n = re.subn(r"and\.b32 tjt, %r\d+, 1; max\.u32 tjt, tjt, (%r\d+);",
                       r"mov.b32 tjt, \1;", ptx)
    assert n == 1
    lines = [line for line in sass(plain, "sm_90a").splitlines()
             if "MUFU.EX2" in line or "BAR.ARV R" in line]
    end = next(i for i, line in enumerate(lines) if "BAR.ARV R" in line)
    assert sum("MUFU.EX2" in line for line in lines[:end]) < 8


@pytest.mark.parametrize("kernel, cfg", [(NO_TURNS, TWO), (TURNS, THREE), (NO_TURNS, THREE)])
def test_no_turns_when_off_or_with_three_warpgroups(kernel, cfg):
    ptx = _ptx(kernel, cfg)
    assert "tjt" not in ptx and "bar.arrive 2, 256;" not in ptx
    assert not re.search(r"bar\.sync %r\d+, 256;", ptx)


def test_no_turns_where_a_row_sum_spans_both_warpgroups():
    """64-row blocks on 256 threads: each row's sum is exchanged between the warpgroups
    through shared memory behind a barrier of both, which a warpgroup waiting for its
    turn would never reach (found hanging on the H200)."""
    for block_N in (64, 128):
        ptx = _ptx(TURNS, dict(TWO, block_M=64, block_N=block_N))
        assert "tjt" not in ptx and not re.search(r"bar\.sync %r\d+, 256;", ptx)


@tilejit.kernel
def biased(Q, K, V, Bias, Output, block_N: T.constexpr = 128):
    """FlashAttention's step with a bias row from shared memory inside the exponentials:
    a barrier of both consumer warpgroups may precede that loop, so no turns."""
    batch, seq_len, heads, dim = Q.shape
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    with T.Kernel(T.ceildiv(seq_len, 128), heads, batch, threads=256) as (bx, by, bz):
        Q_shared = T.alloc_shared([128, dim], Q.dtype)
        K_shared = T.alloc_shared([block_N, dim], Q.dtype)
        V_shared = T.alloc_shared([block_N, dim], Q.dtype)
        B_shared = T.alloc_shared([block_N], T.float32)
        acc_s = T.alloc_fragment([128, block_N], T.float32)
        acc_s_cast = T.alloc_fragment([128, block_N], Q.dtype)
        acc_o = T.alloc_fragment([128, dim], T.float32)
        m = T.alloc_fragment([128], T.float32)
        m_prev = T.alloc_fragment([128], T.float32)
        r = T.alloc_fragment([128], T.float32)
        l_sum = T.alloc_fragment([128], T.float32)
        T.copy(Q[bz, bx * 128:(bx + 1) * 128, by, :], Q_shared)
        T.copy(Bias[0:block_N], B_shared)
        T.fill(acc_o, 0)
        T.fill(m, -T.infinity(T.float32))
        for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
            T.clear(acc_s)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                   policy=T.GemmWarpPolicy.FullRow)
            T.copy(m, m_prev)
            T.reduce_max(acc_s, m, dim=1, clear=False)
            for i, j in T.Parallel(128, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale + B_shared[j])
            T.reduce_sum(acc_s, r, dim=1)
            for i in T.Parallel(128):
                l_sum[i] = r[i]
            T.copy(acc_s, acc_s_cast)
            for i, j in T.Parallel(128, dim):
                acc_o[i, j] *= T.exp2(m_prev[i] * scale - m[i] * scale)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
            T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(128, dim):
            acc_o[i, j] /= l_sum[i]
        T.copy(acc_o, Output[bz, bx * 128:(bx + 1) * 128, by, :])


def test_no_turns_where_the_exponentials_read_shared_memory():
    q = np.zeros((1, 512, 2, 128), np.float16)
    bias = np.zeros(128, np.float32)
    ptx = TURNS.__class__(biased.func, fast_math=True).compile(
        q, q, q, bias, q, target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg" in ptx            # warp-specialized, two consumer warpgroups
    assert "tjt" not in ptx and not re.search(r"bar\.sync %r\d+, 256;", ptx)


def test_both_warpgroups_meet_after_the_last_turn():
    """Warpgroup 0 takes the last handover (barrier 2), then both consumer warpgroups
    meet (barrier 1), so a next run of the loop (an outer loop around it) cannot have
    warpgroup 1's first handover complete barrier 2 together with its last one."""
    ptx = _ptx(TURNS, TWO)
    finish = ptx.index("bar.sync 2, 256;")
    assert "bar.sync 1, 256;" in ptx[finish:finish + 400]


def test_the_switch_reads_the_environment(monkeypatch):
    monkeypatch.setenv("TILEJIT_TURNS", "0")
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    assert "tjt" not in _ptx(KernelFunction(flashattn.func, fast_math=True), TWO)


def test_the_simulator_is_not_affected():
    import torch
    q, k, v = (torch.randn(1, 200, 1, 64, dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    KernelFunction(flashattn.func, fast_math=True, target="sim")(q, k, v, o, **TWO)
    assert (o.float() - reference(q, k, v, False)).abs().max().item() < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("block_M", [64, 128])
def test_64_row_blocks_on_256_threads_run(block_M):
    """The configuration that hung when it took turns (a row sum across warpgroups)."""
    import torch
    q, k, v = (torch.randn(1, 700, 2, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    TURNS(q, k, v, o, **dict(TWO, block_M=block_M))
    torch.cuda.synchronize()
    assert (o.float() - reference(q, k, v, False)).abs().max().item() < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_turns_change_no_bit_on_the_gpu(dtype, causal):
    import torch
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(2, 1000, 4, 128, device="cuda", dtype=dt) for _ in range(3))
    on, off = torch.empty_like(q), torch.empty_like(q)
    TURNS(q, k, v, on, is_causal=causal, **TWO)
    NO_TURNS(q, k, v, off, is_causal=causal, **TWO)
    torch.cuda.synchronize()
    assert torch.equal(on, off)
    assert (on.float() - reference(q, k, v, causal)).abs().max().item() < 2e-2
    small = [x[:1, :300, :1].cpu() for x in (q, k, v)]
    o_sim = torch.empty_like(small[0])
    KernelFunction(flashattn.func, fast_math=True, target="sim")(*small, o_sim,
                                                                 is_causal=causal, **TWO)
    o_gpu = torch.empty_like(small[0]).cuda()
    TURNS(*(x.cuda() for x in small), o_gpu, is_causal=causal, **TWO)
    torch.cuda.synchronize()
    assert (o_gpu.float().cpu() - o_sim.float()).abs().max().item() < 2e-2

"""The seeds' FlashAttention kernel (examples/flash_attention/flash_attn.py): in
simulation on small shapes and, with ``-m gpu``, on the device up to seq 4096, against
torch SDPA computed in float32 on upcast inputs, and against the simulator."""
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language.dtypes import float16, float32
from tilejit.ir.plan import FRAGMENT, LOCAL, SHARED, Tile, TilePlan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
from flash_attn import flashattn, reference  # noqa: E402

flashattn_sim = tilejit.kernel(flashattn.func, target="sim")
flashattn_fast = tilejit.kernel(flashattn.func, fast_math=True)   # as the benchmark runs it
PTXAS = shutil.which("ptxas")
# thread_index_here's inline asm as LLVM prints it (the plain %tid.x read has a tab)
TID_WHERE_USED = re.compile(r"// begin inline asm\s+mov\.u32 %r\d+, %tid\.x;")


def _qkv(b, s, h, d, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, h, d, generator=g).to(dtype).to(device) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,s,h,d,dtype", [
    (1, 64, 1, 64, torch.float16),
    (1, 100, 2, 64, torch.float16),          # seq not a multiple of the block: masked tail
    (2, 130, 1, 128, torch.float16),
    (1, 96, 2, 64, torch.bfloat16),
])
def test_flash_attention_simulated(b, s, h, d, dtype, causal):
    q, k, v = _qkv(b, s, h, d, dtype)
    o = torch.empty_like(q)
    flashattn(q, k, v, o, is_causal=causal)
    err = (o.float() - reference(q, k, v, causal)).abs().max().item()
    assert not torch.isnan(o.float()).any()
    assert err < (2e-2 if dtype == torch.float16 else 4e-2), err


def test_flash_attention_ptx_uses_tensor_cores_and_async_copies():
    q = torch.zeros(1, 256, 2, 64, dtype=torch.float16)
    ptx = flashattn.compile(q, q, q, q, target="cuda", arch="sm_80").ptx
    for instruction in ("mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned",
                        "cp.async.cg.shared.global", "shfl.sync.bfly", "bar.sync"):
        assert instruction in ptx
    # the K/V head (query head // group) is divided once, before the K/V loop: between
    # the loop's first and last mma there is no integer division (two 64-bit divisions per
    # iteration cost 5 % on the H200, 2026-11-29)
    loop = ptx[ptx.index("mma.sync"):ptx.rindex("mma.sync")]
    assert "div.s" not in loop and "div.u" not in loop


def _spill_stores(ptx, tmp_path):
    """The bytes of spill stores ptxas reports for sm_90a."""
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    out = subprocess.run([PTXAS, "-arch=sm_90a", "-v", str(path), "-o", str(path) + ".cubin"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(re.search(r"(\d+) bytes spill stores", out.stderr).group(1))


@pytest.mark.parametrize("causal", [False, True])
def test_register_starved_attention_reads_the_thread_index_where_used(causal, tmp_path,
                                                                     monkeypatch):
    """At the benchmark shape (batch 4, seq 4096, 32 heads, head dim 128, 128x64 blocks, 128
    threads, 2 stages) the fragments take more than tiles.STARVED = 192 registers per
    thread: the cp.async chunk addresses and the fragment loops' coordinates read %tid.x
    where used (inline asm, which LLVM does not hoist) instead of holding what derives from
    it through the K/V loop. ptxas -arch=sm_90a reports 56 B of spill stores (84 B when
    they were held), causal 72 B (124 B); the bound of 80 lies between (H200/ptxas 13.0,
    2026-11-30). The cp.async path: on sm_90 the copies are TMA's (passes/tma.py)."""
    monkeypatch.setenv("TILEJIT_TMA", "0")
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((4, 4096, 32, 128), np.float16)
    ptx = flashattn_fast.compile(q, q, q, q, block_M=128, block_N=64, threads=128,
                                 num_stages=2, is_causal=causal, target="cuda",
                                 arch="sm_90a").ptx
    assert len(TID_WHERE_USED.findall(ptx)) > 0
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    assert _spill_stores(ptx, tmp_path) <= 80


def test_benchmark_gemm_keeps_its_thread_index(tmp_path, monkeypatch):
    """The 128x128x64 GEMM of benchmarks/run.py (128 words of fragments: not starved)
    keeps its one loop-invariant %tid.x read, no reads where used: its addresses
    recomputed in the loop cost it 3-8 %. No spills (H200/ptxas 13.0, 2026-11-30)."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    from run import gemm_kernel
    a = np.zeros((4096, 4096), np.float16)
    ptx = gemm_kernel.compile(a, a, a, block_M=128, block_N=128, block_K=64, threads=128,
                              num_stages=3, target="cuda", arch="sm_90a").ptx
    assert len(TID_WHERE_USED.findall(ptx)) == 0
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    assert _spill_stores(ptx, tmp_path) == 0


def test_register_words_counts_fragments_and_local_tiles():
    """TilePlan.register_words (what tiles.thread_index compares with STARVED): a fragment
    takes its per-thread slots rounded up to 32-bit words, a local tile its whole size,
    a shared tile none."""
    def frag(name, dtype, slots):
        return Tile(name, FRAGMENT, (128, 128), dtype, 1, indexing=SimpleNamespace(slots=slots))
    plan = TilePlan(tiles={
        "acc": frag("acc", float32, 128),                    # 128 words
        "p": frag("p", float16, 33),                         # 66 bytes: 17 words
        "local": Tile("local", LOCAL, (5,), float16, 2),     # 10 bytes: 3 words
        "smem": Tile("smem", SHARED, (128, 64), float16, 3),
    })
    assert plan.register_words() == 128 + 17 + 3


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,s,h,d,dtype", [
    (2, 1024, 4, 64, torch.float16),
    (1, 4096, 8, 128, torch.float16),
    (1, 1000, 4, 128, torch.float16),
    (2, 777, 2, 64, torch.bfloat16),
])
def test_flash_attention_gpu(b, s, h, d, dtype, causal):
    q, k, v = _qkv(b, s, h, d, dtype, device="cuda")
    o = torch.empty_like(q)
    flashattn(q, k, v, o, is_causal=causal)
    torch.cuda.synchronize()
    err = (o.float() - reference(q, k, v, causal)).abs().max().item()
    assert err < (2e-2 if dtype == torch.float16 else 4e-2), err
    if s <= 1024:
        small = [x[:1, :128, :1].cpu() for x in (q, k, v)]
        o_sim = torch.empty_like(small[0])
        flashattn_sim(*small, o_sim, is_causal=causal)
        o_gpu = torch.empty_like(small[0]).cuda()
        flashattn(*(x.cuda() for x in small), o_gpu, is_causal=causal)
        torch.cuda.synchronize()
        assert (o_gpu.float().cpu() - o_sim.float()).abs().max().item() < 1e-2


def _loop_of(ptx):
    """The PTX of the consumers' K/V loop: from the first wgmma to the last."""
    return ptx[ptx.index("wgmma.mma_async"):ptx.rindex("wgmma.mma_async")]


@pytest.mark.parametrize("causal", [False, True])
def test_q_written_once_gets_its_barrier_before_the_loop(causal, tmp_path, monkeypatch):
    """128x128 blocks, 256 threads on sm_90a (two consumer warpgroups and a producer):
    Q, written once before the K/V loop and read by every QK^T, gets the consumers'
    barrier before the loop, not in every iteration, where it held the two warpgroups in
    step (459 -> 494 TFLOP/s at b4 h32 s4096 d128 on the H200, 2026-12-02)."""
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((2, 1024, 4, 128), np.float16)
    ptx = flashattn_fast.compile(q, q, q, q, block_M=128, block_N=128, threads=256,
                                 num_stages=2, is_causal=causal, target="cuda",
                                 arch="sm_90a").ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240" in ptx
    assert "bar.sync 1," not in _loop_of(ptx)
    before = ptx[:ptx.index("wgmma.mma_async")]
    assert "bar.sync 1, 256" in before
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    _spill_stores(ptx, tmp_path)


@tilejit.kernel
def _attention_p_through_shared(Q, K, V, O, block_M: T.constexpr = 128,
                                block_N: T.constexpr = 128):
    batch, seq, heads, dim = Q.shape
    with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=256) as (bx, by, bz):
        Q_s = T.alloc_shared([block_M, dim], Q.dtype)
        K_s = T.alloc_shared([block_N, dim], Q.dtype)
        V_s = T.alloc_shared([block_N, dim], Q.dtype)
        P_s = T.alloc_shared([block_M, block_N], Q.dtype)
        S = T.alloc_fragment([block_M, block_N], T.float32)
        acc = T.alloc_fragment([block_M, dim], T.float32)
        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(seq, block_N), num_stages=2):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
            T.clear(S)
            T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(S, P_s)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
            T.gemm(P_s, V_s, acc, policy=T.GemmWarpPolicy.FullRow)
        T.copy(acc, O[bz, bx * block_M:(bx + 1) * block_M, by, :])


def test_a_tile_written_in_every_iteration_keeps_its_barrier_in_the_loop(monkeypatch):
    """P through a shared tile both consumer warpgroups write and read in every step:
    the consumers' barrier (named barrier 1) stays in the loop; only what was written
    before the loop alone gets its barrier hoisted."""
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((1, 512, 2, 64), np.float16)
    ptx = _attention_p_through_shared.compile(q, q, q, q, target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg.inc" in ptx and "bar.sync 1, 256" in _loop_of(ptx)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,s,h,d,dtype", [
    (1, 1000, 4, 128, torch.float16),
    (2, 2048, 2, 64, torch.bfloat16),
])
def test_two_consumer_warpgroups_on_the_gpu(b, s, h, d, dtype, causal):
    """The benchmark's best configuration (128x128 blocks, 256 threads: two consumer
    warpgroups) against float32 SDPA and, on a slice, the simulator."""
    cfg = dict(block_M=128, block_N=128, threads=256, num_stages=2, is_causal=causal)
    _against_sdpa_and_the_simulator(flashattn, cfg, b, s, h, d, dtype, causal, seed=0)


def _against_sdpa_and_the_simulator(kernel, cfg, b, s, h, d, dtype, causal, seed):
    """On the GPU against float32 SDPA; on a 300-long slice against the simulator."""
    q, k, v = _qkv(b, s, h, d, dtype, device="cuda", seed=seed)
    o = torch.empty_like(q)
    kernel(q, k, v, o, **cfg)
    torch.cuda.synchronize()
    err = (o.float() - reference(q, k, v, causal)).abs().max().item()
    assert err < (2e-2 if dtype == torch.float16 else 4e-2), err
    small = [x[:1, :300, :1].cpu() for x in (q, k, v)]
    o_sim = torch.empty_like(small[0])
    flashattn_sim(*small, o_sim, **cfg)
    o_gpu = torch.empty_like(small[0]).cuda()
    kernel(*(x.cuda() for x in small), o_gpu, **cfg)
    torch.cuda.synchronize()
    assert (o_gpu.float().cpu() - o_sim.float()).abs().max().item() < 2e-2



THREE_CONSUMERS = dict(block_M=192, block_N=96, threads=384, num_stages=2)


def test_three_consumer_warpgroups_compile_and_fit(tmp_path, monkeypatch):
    """192x96 blocks at 384 threads: three consumer warpgroups (one m64 slice of the rows
    each) and the producer, 512 threads; the producer's 24 registers leave the consumers
    160. Faster than two warpgroups on the H200 (2026-12-02, b4 h32 s4096 d128: 0.941 vs
    0.888 of cuDNN, fp16 non-causal), ptxas spills at most a few words."""
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((1, 1000, 2, 128), np.float16)
    ptx = flashattn_fast.compile(q, q, q, q, **THREE_CONSUMERS, target="cuda",
                                 arch="sm_90a").ptx
    assert ".maxntid 512" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 160" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16" in ptx
    assert "bar.sync 1, 384" in ptx
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    assert _spill_stores(ptx, tmp_path) <= 64


@pytest.mark.parametrize("causal", [False, True])
def test_three_consumer_warpgroups_simulated(causal):
    q, k, v = _qkv(1, 200, 1, 64, torch.float16, seed=3)
    o = torch.empty_like(q)
    flashattn_sim(q, k, v, o, is_causal=causal, **THREE_CONSUMERS)
    assert (o.float() - reference(q, k, v, causal)).abs().max().item() < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,s,h,d,dtype", [
    (1, 1000, 4, 128, torch.float16),
    (2, 2048, 2, 128, torch.bfloat16),
    (1, 4096, 2, 128, torch.float16),
])
def test_three_consumer_warpgroups_on_the_gpu(b, s, h, d, dtype, causal):
    """192x96 blocks, three consumer warpgroups: against float32 SDPA and, on a slice
    whose length is not a multiple of 192, the simulator."""
    cfg = dict(THREE_CONSUMERS, is_causal=causal)
    _against_sdpa_and_the_simulator(flashattn_fast, cfg, b, s, h, d, dtype, causal, seed=s)


def _gqa(b, s, h, kvh, d, dtype, layout, device="cpu", seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (lambda heads: (b, s, heads, d)) if layout == "bshd" else (
        lambda heads: (b, heads, s, d))
    q = torch.randn(*shape(h), generator=g).to(dtype).to(device)
    k, v = (torch.randn(*shape(kvh), generator=g).to(dtype).to(device) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout,h,kvh", [("bhsd", 2, 2), ("bhsd", 4, 1), ("bshd", 4, 2)])
def test_flash_attention_layouts_and_gqa_simulated(layout, h, kvh, causal):
    q, k, v = _gqa(1, 90, h, kvh, 64, torch.float16, layout)
    o = torch.empty_like(q)
    flashattn(q, k, v, o, is_causal=causal, layout=layout)
    err = (o.float() - reference(q, k, v, causal, layout)).abs().max().item()
    assert err < 2e-2, err


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout,h,kvh,d", [("bhsd", 32, 32, 128), ("bhsd", 32, 8, 128),
                                           ("bshd", 16, 4, 64)])
def test_flash_attention_layouts_and_gqa_gpu(layout, h, kvh, d, causal):
    q, k, v = _gqa(2, 2048, h, kvh, d, torch.float16, layout, device="cuda")
    o = torch.empty_like(q)
    flashattn(q, k, v, o, is_causal=causal, layout=layout)
    torch.cuda.synchronize()
    err = (o.float() - reference(q, k, v, causal, layout)).abs().max().item()
    assert err < 2e-2, err


def _lse_reference(q, k, causal):
    d = q.shape[-1]
    s = (q.float().transpose(1, 2) @ k.float().transpose(1, 2).transpose(-1, -2)) / d ** 0.5
    if causal:
        n = q.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    return torch.logsumexp(s, -1)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_returns_the_log_sum_exp_on_request(causal):
    q, k, v = _qkv(1, 100, 2, 64, torch.float16, seed=3)
    o = torch.empty_like(q)
    lse = torch.empty(1, 2, 100)
    flashattn(q, k, v, o, lse, is_causal=causal)
    assert (lse - _lse_reference(q, k, causal)).abs().max().item() < 1e-3
    assert (o.float() - reference(q, k, v, causal)).abs().max().item() < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_log_sum_exp_gpu(causal):
    q, k, v = _qkv(2, 1000, 4, 128, torch.float16, device="cuda", seed=3)
    o = torch.empty_like(q)
    lse = torch.empty(2, 4, 1000, device="cuda")
    flashattn(q, k, v, o, lse, is_causal=causal)
    torch.cuda.synchronize()
    assert (lse - _lse_reference(q, k, causal)).abs().max().item() < 1e-3


def _backward_case(b, s, h, d, causal, device, seed=0):
    from flash_attn_bwd import FlashAttention, reference_grads
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, s, h, d, generator=g).half().to(device).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, s, h, d, generator=g).half().to(device)
    FlashAttention.apply(q, k, v, causal).backward(dout)
    refs = reference_grads(q, k, v, dout, causal)
    for got, ref in zip((q.grad, k.grad, v.grad), refs):
        assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-2
    return [x.grad.cpu() for x in (q, k, v)]


@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_float64_autograd_in_simulation(causal):
    _backward_case(1, 70, 2, 32, causal, "cpu")


def test_backward_causal_heavy_blocks_first_in_simulation():
    """Causal with (head, batch) pairs in groups of four: the key blocks launched
    heaviest first within each group (two groups here) still cover every block once."""
    _backward_case(2, 150, 4, 32, True, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("b,s,h,d,causal", [(2, 1000, 4, 64, False), (1, 257, 2, 128, True),
                                            (2, 512, 3, 64, True), (2, 520, 4, 64, True)])
def test_backward_on_the_gpu_matches_autograd_and_the_simulator(b, s, h, d, causal):
    gpu = _backward_case(b, s, h, d, causal, "cuda", seed=s)
    if s <= 300:
        sim = _backward_case(b, s, h, d, causal, "cpu", seed=s)
        for x, y in zip(gpu, sim):
            torch.testing.assert_close(x.float(), y.float(), rtol=2e-2, atol=2e-2)


def _backward_blocks_case(s, d, causal, device, **cfg):
    """attention_backward with the given block shape against float64 autograd."""
    from flash_attn_bwd import attention_backward, reference_grads
    g = torch.Generator().manual_seed(s)
    q, k, v, dout = (torch.randn(1, s, 2, d, generator=g).half().to(device) for _ in range(4))
    out = torch.empty_like(q)
    lse = torch.empty(1, 2, s, dtype=torch.float32, device=device)
    flashattn(q, k, v, out, lse, is_causal=causal)
    grads = attention_backward(q, k, v, out, lse, dout, causal, **cfg)
    for got, ref in zip(grads, reference_grads(q, k, v, dout, causal)):
        assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-2
    return [x.cpu() for x in grads]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(block_M=64, block_N=128, threads=256, num_stages=2),
                                 dict(block_M=32, block_N=64, threads=128, num_stages=1)])
def test_backward_block_shapes_in_simulation(cfg, causal):
    """Key blocks taller than the query blocks (the causal loop starts at the diagonal
    query block, bx * block_N // block_M), pipelined or not."""
    _backward_blocks_case(150, 32, causal, "cpu", **cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(block_M=64, block_N=128, threads=256, num_stages=2),
                                 dict(block_M=64, block_N=64, threads=256, num_stages=1)])
def test_backward_block_shapes_on_the_gpu(cfg, causal):
    """Against float64 autograd at s = 1000, d = 128, and against the simulator at 200."""
    _backward_blocks_case(1000, 128, causal, "cuda", **cfg)
    gpu = _backward_blocks_case(200, 64, causal, "cuda", **cfg)
    sim = _backward_blocks_case(200, 64, causal, "cpu", **cfg)
    for x, y in zip(gpu, sim):
        torch.testing.assert_close(x.float(), y.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_float64_in_simulation(causal):
    from flash_attn_varlen import flashattn_varlen, packed_inputs, reference
    lens_q, lens_k = [40, 1, 66], [40, 7, 30]
    q, k, v, cu_q, cu_k = packed_inputs(lens_q, lens_k, 2, 1, 32, "cpu")
    out = torch.empty_like(q)
    flashattn_varlen(q, k, v, cu_q, cu_k, max(lens_q), out, is_causal=causal)
    ref = reference(q, k, v, cu_q, cu_k, causal)
    assert (out.double() - ref).abs().max().item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_on_the_gpu_matches_float64_and_the_simulator(causal):
    from flash_attn_varlen import flashattn_varlen, packed_inputs, reference
    lens_q, lens_k = [300, 1, 129, 64], [300, 70, 100, 64]
    q, k, v, cu_q, cu_k = packed_inputs(lens_q, lens_k, 8, 2, 128, "cuda", seed=7)
    out = torch.full_like(q, float("nan"))
    flashattn_varlen(q, k, v, cu_q, cu_k, max(lens_q), out, is_causal=causal)
    torch.cuda.synchronize()
    ref = reference(q.cpu(), k.cpu(), v.cpu(), cu_q.cpu(), cu_k.cpu(), causal)
    assert (out.double().cpu() - ref).abs().max().item() < 1e-2
    sim = torch.empty_like(q.cpu())
    tilejit.kernel(flashattn_varlen.func, target="sim")(
        q.cpu(), k.cpu(), v.cpu(), cu_q.cpu(), cu_k.cpu(), max(lens_q), sim, is_causal=causal)
    torch.testing.assert_close(out.cpu().float(), sim.float(), rtol=1e-2, atol=1e-2)


def test_conflicting_fragment_layouts_are_converted_through_shared_memory(tmp_path,
                                                                          monkeypatch):
    """block_M = block_N = 32 at 128 threads, FullRow: the scores' accumulator (2 x 2 warps)
    and the second gemm's A operand in registers (2 warp rows, copied on 2 warp columns)
    need different layouts; the T.copy between them goes through a shared tile."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = torch.zeros(1, 256, 2, 64, dtype=torch.float16)
    for arch in ("sm_80", "sm_90a"):
        tilejit.kernel(flashattn.func).compile(q, q, q, q.clone(), block_M=32, block_N=32,
                                               threads=128, target="cuda", arch=arch)
    plans = [p.read_text() for p in tmp_path.rglob("*tile_plan.txt")]
    assert plans and all("converts 'acc_s' to the layout of 'acc_s_cast'" in p for p in plans)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_small_blocks_with_a_layout_conversion_match_torch_on_the_gpu(causal):
    q, k, v = (torch.randn(2, 300, 4, 64, device="cuda", dtype=torch.float16)
               for _ in range(3))
    out = torch.full_like(q, float("nan"))
    flashattn(q, k, v, out, is_causal=causal, block_M=32, block_N=32, threads=128)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), reference(q, k, v, causal), rtol=2e-2, atol=2e-2)


def _op_step(b, s, h, d, causal, device):
    """flash_attention (the operator example) forward and backward under
    torch.compile(fullgraph=True): one graph, no break; gradients against float64."""
    from flash_attention.flash_attn_op import flash_attention
    from flash_attn_bwd import reference_grads
    g = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(b, s, h, d, generator=g).half().to(device).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, s, h, d, generator=g).half().to(device)

    def step(q, k, v):
        return flash_attention(q, k, v, causal)
    explain = torch._dynamo.explain(step)(q, k, v)
    assert explain.graph_count == 1 and explain.graph_break_count == 0
    torch.compile(step, fullgraph=True, backend="aot_eager")(q, k, v).backward(dout)
    for got, ref in zip((q.grad, k.grad, v.grad), reference_grads(q, k, v, dout, causal)):
        assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("causal", [False, True])
def test_the_attention_operator_trains_under_torch_compile_in_simulation(causal):
    _op_step(1, 80, 2, 32, causal, "cpu")


def test_the_attention_operator_passes_opcheck():
    from flash_attention.flash_attn_op import FLASH_ATTENTION
    q, k, v = (torch.randn(1, 70, 2, 32).half().requires_grad_() for _ in range(3))
    torch.library.opcheck(FLASH_ATTENTION[True], (q, k, v),
                          test_utils=("test_schema", "test_faketensor",
                                      "test_autograd_registration"))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_the_attention_operator_trains_under_torch_compile_on_the_gpu(causal):
    _op_step(2, 1000, 4, 128, causal, "cuda")


@pytest.mark.gpu
def test_the_attention_operator_replays_in_a_cuda_graph():
    """Captured once, new data copied into the same inputs, replayed: equal to eager."""
    from flash_attention.flash_attn_op import flash_attention
    q, k, v = (torch.randn(2, 512, 4, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    for _ in range(2):                  # compile and warm up outside the capture
        flash_attention(q, k, v, True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attention(q, k, v, True)
    for seed in (1, 2):
        torch.manual_seed(seed)
        for x in (q, k, v):
            x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, flash_attention(q, k, v, True), rtol=0, atol=0)

"""The carver's attention, elementwise and reduction templates: every hint keeps the
limits its docstring states, the ranking follows (traffic + 1) · waves, the figures
match ones computed by hand, and what it recommends compiles (the attention kernel) and
runs in the simulator (the elementwise, reduction and GEMV kernels; the GEMV's on the
device too)."""
import math
import os
import sys

import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit import carver
from tilejit.carver.recommend import CUDA
from tilejit.carver.template import (ElementwiseTemplate, FlashAttentionTemplate,
                                     GEMVTemplate, GeneralReductionTemplate)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ranked(hints):
    scores = [h.score for h in hints]
    return scores == sorted(scores)


def test_attention_hints_keep_shared_memory_and_registers():
    device = CUDA("sm_90a")
    hints = FlashAttentionTemplate(4, 32, 128, 4096, 4096).with_arch(device) \
        .recommend_hints(topk=100)
    assert hints and _ranked(hints)
    for h in hints:
        bm, bn, t = h.config["block_M"], h.config["block_N"], h.config["threads"]
        assert t == 128 * bm // 64 and bm <= 192
        assert h.smem_bytes == (bm * 128 + 2 * 2 * bn * 128) * 2 <= device.smem_cap
        consumers = t // 128
        per_thread = min(255, (65536 // 128 - 24) // consumers) // 8 * 8
        assert bm * (128 + bn) / t <= 0.7 * per_thread
    # 192 x 128 at d 128 spills on the H200 (its accumulators: 160 of 160 registers)
    assert all((h.block_M, h.block_N) != (192, 128) for h in hints)


def test_attention_prefers_fewer_waves_then_larger_key_blocks():
    """b4 h32 s4096 d128 on 132 SMs: 192-row blocks make 22 · 128 = 2816 tiles, 22 waves
    of one block per SM; 128-row blocks 4096 tiles, 32 waves. The key block with the
    most registers left is first: 192 x 96 (112 of 160 registers), the configuration
    measured fastest on the H200 (2026-12-02)."""
    hints = FlashAttentionTemplate(4, 32, 128, 4096, 4096).with_arch(CUDA("sm_90a")) \
        .recommend_hints(topk=3)
    assert [(h.block_M, h.block_N) for h in hints] == [(192, 96), (192, 80), (192, 64)]
    assert hints[0].num_wave == math.ceil(math.ceil(4096 / 192) * 128 / 132) == 22
    traffic = (192 * 128 + 2 * 4096 * 128) * 2 + 192 * 128 * 2
    assert hints[0].traffic == traffic and hints[0].score == (traffic + 1) * 22
    # TileLang's spelling gives the same
    same = FlashAttentionTemplate(4, 32, 128, 4096, 4096).get_hardware_aware_configs(
        CUDA("sm_90a"), topk=3)
    assert [h.config for h in same] == [h.config for h in hints]


def test_attention_hints_compile_for_sm_90a():
    sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
    from flash_attn import flashattn
    hint = FlashAttentionTemplate(1, 2, 64, 256, 256).with_arch(CUDA("sm_90a")) \
        .recommend_hints(topk=1)[0]
    q = np.zeros((1, 256, 2, 64), np.float16)
    handle = flashattn.compile(q, q, q, q.copy(), target="cuda", arch="sm_90a", **hint.config)
    assert "wgmma.mma_async" in handle.ptx


@pytest.mark.parametrize("bad", [dict(head_dim=0), dict(seq_length=-1), dict(in_dtype="int4")])
def test_attention_template_rejects_bad_figures(bad):
    args = dict(batch_size=1, num_heads=1, head_dim=64, seq_length=128, seq_kv_length=128)
    args.update(bad)
    with pytest.raises(ValueError, match="FlashAttentionTemplate"):
        FlashAttentionTemplate(**args).recommend_hints()


def test_elementwise_hints_are_whole_vectors_and_count_waves():
    device = CUDA("sm_90a")
    hints = ElementwiseTemplate((1 << 28,), "float32", threads=256, inputs=2) \
        .with_arch(device).recommend_hints(topk=10)
    assert hints and _ranked(hints)
    for h in hints:
        block = h.config["block"]
        assert block % (256 * 4) == 0                    # 16-byte accesses per thread
        assert h.num_wave == math.ceil(math.ceil((1 << 28) / block) / (8 * 132))
        assert h.traffic == block * 4 * 3


def test_elementwise_hint_runs_the_vector_add_in_the_simulator():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from vector_add import vector_add
    hint = ElementwiseTemplate((5000,), "float32", inputs=2).recommend_hints(topk=1)[0]
    a = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    c = np.zeros_like(a)
    vector_add(a, a, c, **hint.config)
    np.testing.assert_array_equal(c, 2 * a)


def test_reduction_hints_hold_rows_in_registers():
    device = CUDA("sm_90a")
    hints = GeneralReductionTemplate("SR", (16384, 8192), "float16").with_arch(device) \
        .recommend_hints(topk=50)
    assert hints and _ranked(hints)
    for h in hints:
        bm, t = h.config["block_M"], h.config["threads"]
        assert 16384 % bm == 0 and math.ceil(bm * 8192 / t) <= 96
        assert h.blocks_per_sm * t <= 2048
    with pytest.raises(ValueError, match="one letter an axis"):
        GeneralReductionTemplate("SR", (4, 4, 4)).recommend_hints()
    with pytest.raises(ValueError, match="one letter an axis"):
        GeneralReductionTemplate("SX", (4, 4)).recommend_hints()


@pytest.mark.parametrize("structure, shape, rows, length", [
    ("SSR", (64, 16, 1024), 1024, 1024), ("SRS", (64, 1024, 16), 1024, 1024),
    ("SS", (1024, 1024), 1 << 20, 1), ("RSR", (2, 512, 8), 512, 16)])
def test_reduction_structures_multiply_into_rows_and_row_length(structure, shape, rows,
                                                                length):
    """TileLang's structures: the spatial extents multiply into the rows, the reduced
    ones into the row length; the hints are those of that (rows, length) as "SR"."""
    device = CUDA("sm_90a")
    got = GeneralReductionTemplate(structure, shape, "float16").with_arch(device) \
        .recommend_hints(topk=5)
    same = GeneralReductionTemplate("SR", (rows, length), "float16").with_arch(device) \
        .recommend_hints(topk=5)
    assert got and got == same
    assert all(h.traffic == 2 * h.block_M * length * 2 for h in got)


def test_gemv_hints_fill_the_device_before_saving_traffic():
    device = CUDA("sm_90a")
    hints = GEMVTemplate(N=16384, K=4096, in_dtype="float16").with_arch(device) \
        .recommend_hints(topk=50)
    assert hints
    for h in hints:
        bn, rt = h.config["BLOCK_N"], h.config["reduce_threads"]
        assert h.threads == bn * rt <= 1024 and h.block_K == rt * 8
        assert h.traffic == (bn + 1) * 4096 * 2 + bn * 2
        per_sm = min(2048 // h.threads, 32)
        assert h.num_wave == math.ceil(math.ceil(16384 / bn) / (per_sm * 132))
    keys = [(h.num_wave, -min(math.ceil(16384 / h.block_N), h.blocks_per_sm * 132) * h.threads,
             h.score) for h in hints]
    assert keys == sorted(keys)
    # a short K leaves out reduction widths wider than it
    short = GEMVTemplate(N=64, K=256).recommend_hints(topk=100)
    assert {h.config["reduce_threads"] for h in short} == {32}
    with pytest.raises(ValueError, match="K must be a positive int"):
        GEMVTemplate(N=64, K=0).recommend_hints()


@tilelang.jit
def _gemv(A, B, BLOCK_N: int, reduce_threads: int, dtype: T.dtype = T.float16):
    """y = B @ a as TileLang's GEMV examples take the template's config: BLOCK_N rows a
    block, reduce_threads threads a row, 8 elements a thread a step."""
    N = T.const("N")
    K = T.const("K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), T.float32)
    BK = reduce_threads * 8
    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=BLOCK_N * reduce_threads) as bn:
        prod = T.alloc_fragment((BLOCK_N, BK), T.float32)
        part = T.alloc_fragment((BLOCK_N,), T.float32)
        acc = T.alloc_fragment((BLOCK_N,), T.float32)
        T.clear(acc)
        for k in T.serial(T.ceildiv(K, BK)):
            for i, j in T.Parallel(BLOCK_N, BK):
                prod[i, j] = T.cast(B[bn * BLOCK_N + i, k * BK + j], T.float32) * \
                    T.cast(A[k * BK + j], T.float32)
            T.reduce_sum(prod, part, dim=1)
            for i in T.Parallel(BLOCK_N):
                acc[i] += part[i]
        for i in T.Parallel(BLOCK_N):
            C[bn * BLOCK_N + i] = acc[i]
    return C


def _gemv_check(N, K, device):
    torch = pytest.importorskip("torch")
    hint = carver.GEMVTemplate(N=N, K=K, in_dtype=T.float16).recommend_hints(topk=1)[0]
    g = torch.Generator().manual_seed(3)
    a = torch.randn(K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    ref = b.double() @ a.double()
    y = _gemv(a.to(device), b.to(device), **hint.config).cpu()
    torch.testing.assert_close(y.double(), ref, rtol=1e-4, atol=1e-3)
    return hint, a, b, y


def test_gemv_hint_runs_a_gemv_in_the_simulator():
    """TileLang's spelling: ``from tilelang import carver; carver.GEMVTemplate(...)``."""
    hint, *_ = _gemv_check(256, 512, "cpu")
    assert hint.config["reduce_threads"] in (32, 64)


@pytest.mark.gpu
def test_gpu_gemv_hint_runs_a_gemv_on_the_device():
    torch = pytest.importorskip("torch")
    hint, a, b, y = _gemv_check(1024, 2048, "cuda")
    sim = _gemv(a, b, **hint.config)
    # (float32 sums of 2048 products in another order: the GPU's tree, the simulator's)
    torch.testing.assert_close(y, sim, rtol=1e-4, atol=1e-4)


def test_reduction_hint_runs_softmax_in_the_simulator():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from softmax import softmax
    hint = GeneralReductionTemplate("SR", (8, 1024), "float32").recommend_hints(topk=1)[0]
    x = np.random.default_rng(1).standard_normal((8, 1024)).astype(np.float32)
    y = np.zeros_like(x)
    softmax(x, y, **hint.config)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_small_problems_and_numpy_extents_and_torch_dtypes():
    """A reduction smaller than a block gets a warp, not 128 rows of one; numpy ints are
    extents; the references take torch's dtypes as well as names."""
    torch = pytest.importorskip("torch")
    tiny = GeneralReductionTemplate("SR", (3, 5)).recommend_hints(topk=10)
    assert tiny and all(h.block_M <= 3 and h.threads == 32 for h in tiny)
    hint = GeneralReductionTemplate("SR", (np.int64(4), np.int64(64))).recommend_hints(1)[0]
    assert type(hint.block_N) is int and type(hint.traffic) is int
    assert ElementwiseTemplate(np.int64(4096)).recommend_hints(1)
    gemv = GEMVTemplate(N=4, K=8, in_dtype=torch.float16, accum_dtype=torch.float32,
                        out_dtype="float16")
    y = gemv.reference(torch.ones(8).half(), torch.ones(4, 8).half())
    assert y.dtype == torch.float16 and y.tolist() == [8.0] * 4
    matmul = carver.MatmulTemplate(M=4, N=4, K=4, out_dtype=torch.bfloat16)
    assert matmul.reference(torch.ones(4, 4).half(), torch.ones(4, 4).half()).dtype == \
        torch.bfloat16

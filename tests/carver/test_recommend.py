"""tilejit.carver's recommender: the seeds' search (candidates from powers of two and
factors, shared-memory and register limits as hard constraints, (traffic + 1) · waves as
the objective), checked on figures computed by hand and by compiling what it recommends."""
import math

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.carver.recommend import CUDA, MatmulTemplate


@tilejit.kernel
def matmul(A, B, C, block_M: T.constexpr = 128, block_N: T.constexpr = 128,
           block_K: T.constexpr = 32, threads: T.constexpr = 128,
           num_stages: T.constexpr = 3):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_every_hint_keeps_the_limits_and_the_ranking_follows_the_objective(arch):
    device = CUDA(arch)
    hints = MatmulTemplate(4096, 4096, 4096).with_arch(device).recommend_hints(topk=50)
    assert hints
    for h in hints:
        assert h.smem_bytes == h.num_stages * (h.block_M + h.block_N) * h.block_K * 2
        assert h.smem_bytes <= device.smem_cap
        assert 2 * h.block_M * h.block_N <= device.reg_cap
        grid = math.ceil(4096 / h.block_M) * math.ceil(4096 / h.block_N)
        assert h.num_wave == math.ceil(grid / (h.blocks_per_sm * device.num_sms))
        assert h.traffic == (h.block_M + h.block_N) * 4096 * 2 + h.block_M * h.block_N * 2
        # the bytes of the tiles an SM holds at once, over the waves
        assert h.score == (h.traffic * h.blocks_per_sm + 1) * h.num_wave
        assert h.threads % 32 == 0 and 128 <= h.threads <= 256
        if arch == "sm_90a":
            assert h.block_M % 64 == 0          # whole m64 warpgroup slices
    assert [h.score for h in hints] == sorted(h.score for h in hints)
    # one 128 x 256 block an SM reads a quarter fewer bytes than two 128 x 128 blocks: the
    # shape that ran fastest on the H200 (128 x 256 x 64 s3 0.198 ms, s4 0.204, 128 x 128
    # x 64 0.253 at 4096^3 fp16, 2026-12-03)
    assert hints[0].config == {"block_M": 128, "block_N": 256, "block_K": 64,
                               "threads": 256, "num_stages": 4 if arch == "sm_90a" else 3}


def test_tilelangs_dtype_spellings_are_the_dtypes_they_name():
    """TileLang's auto-tuning tutorial writes ``accum_dtype="float"``: float32's hints."""
    device = CUDA("sm_90a")
    spelt = MatmulTemplate(512, 512, 512, in_dtype="half", accum_dtype="float")
    named = MatmulTemplate(512, 512, 512, in_dtype="float16", accum_dtype="float32")
    assert [h.config for h in spelt.with_arch(device).recommend_hints(topk=5)] == \
        [h.config for h in named.with_arch(device).recommend_hints(topk=5)]


def test_bad_figures_are_clear_errors():
    with pytest.raises(ValueError, match="arch"):
        CUDA("sm_91")
    with pytest.raises(ValueError, match="M must be a positive int"):
        MatmulTemplate(0, 16, 16).recommend_hints()
    with pytest.raises(ValueError, match="unknown dtype"):
        MatmulTemplate(64, 64, 64, in_dtype="float13").recommend_hints()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_top_hints_compile_and_feed_autotune_directly(arch, ptxas):
    hints = MatmulTemplate(1024, 1024, 1024).with_arch(CUDA(arch)).recommend_hints(topk=3)
    a = np.zeros((1024, 1024), np.float16)
    c = np.zeros((1024, 1024), np.float32)
    for h in hints:
        ptx = matmul.compile(a, a.copy(), c, target="cuda", arch=arch, **h.config).ptx
        ptxas(ptx, arch)
    tuned = tilejit.autotune(configs=[h.config for h in hints])(matmul)
    assert tuned.configs == [h.config for h in hints]


def test_tilelang_spelling():
    from tilejit.carver.arch import CUDA as ArchCUDA
    from tilejit.carver.template import MatmulTemplate as Template
    arch = ArchCUDA("cuda")         # the current device, or sm_90a's figures without one
    hints = Template(M=512, N=512, K=512, in_dtype=T.float16, out_dtype=T.float16,
                     accum_dtype=T.float32).with_arch(arch).recommend_hints(topk=4)
    assert len(hints) == 4 and all(set(h.config) == {"block_M", "block_N", "block_K",
                                                      "threads", "num_stages"} for h in hints)

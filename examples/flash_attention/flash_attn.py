"""FlashAttention forward, the seeds' ``flashattn`` kernel (seed 000, FlashAttention;
seed 002, chapter 13) written against tilejit's SPEC: bshd layout (batch, seq, heads,
dim) or bhsd, causal or not, grouped-query attention (K and V with fewer heads than Q),
online softmax in base 2 with the log2(e)/sqrt(d) scale folded in, the probabilities fed
to the second GEMM straight from registers, the K/V loop software-pipelined.

Changes from the seed: `@tilejit.kernel` with constexpr block sizes instead of the
`@T.prim_func` factory; the tail of a sequence that is not a multiple of block_N is
masked (the seed leaves that branch out), and masks are applied to the scores after the
first GEMM rather than written into its accumulator before it (the same result: the
unmasked tiles then start the GEMM from zero, with no scores carried in registers
through the branch); `layout="bhsd"` and GQA (query head h reads
K/V head h // (heads // kv_heads)); an optional ``LSE`` tensor (batch, heads, seq) gets
each row's log-sum-exp of the scaled scores, which a backward pass needs.

    python examples/flash_attention/flash_attn.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def flashattn(Q, K, V, Output, LSE=None, is_causal: T.constexpr = False,
              block_M: T.constexpr = 128,
              block_N: T.constexpr = 64, num_stages: T.constexpr = 2,
              threads: T.constexpr = 128, layout: T.constexpr = "bshd"):
    if layout == "bshd":
        batch, seq_len, heads, dim = Q.shape
        kv_heads = K.shape[2]
    else:
        batch, heads, seq_len, dim = Q.shape
        kv_heads = K.shape[1]
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(d) * log2(e)
    dtype = Q.dtype
    accum_dtype = T.float32
    with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
        Q_shared = T.alloc_shared([block_M, dim], dtype)
        K_shared = T.alloc_shared([block_N, dim], dtype)
        V_shared = T.alloc_shared([block_N, dim], dtype)
        O_shared = T.alloc_shared([block_M, dim], dtype)
        acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
        acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
        acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
        scores_max = T.alloc_fragment([block_M], accum_dtype)
        scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
        scores_scale = T.alloc_fragment([block_M], accum_dtype)
        scores_sum = T.alloc_fragment([block_M], accum_dtype)
        logsum = T.alloc_fragment([block_M], accum_dtype)

        if layout == "bshd":
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
        else:
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity(accum_dtype))

        loop_range = (
            T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            if is_causal else T.ceildiv(seq_len, block_N))

        for k in T.Pipelined(loop_range, num_stages=num_stages):
            if layout == "bshd":
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by // group, :], K_shared)
            else:
                T.copy(K[bz, by // group, k * block_N:(k + 1) * block_N, :], K_shared)
            T.clear(acc_s)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                   policy=T.GemmWarpPolicy.FullRow)
            # only the tiles that cross the diagonal (causal) or the end of the
            # sequence need a mask, applied to the scores (the others skip it)
            if is_causal and (k + 1) * block_N > bx * block_M + 1:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j,
                                                 acc_s[i, j], -T.infinity(acc_s.dtype))
            elif not is_causal and (k + 1) * block_N > seq_len:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j],
                                                 -T.infinity(acc_s.dtype))

            T.copy(scores_max, scores_max_prev)
            T.fill(scores_max, -T.infinity(accum_dtype))
            T.reduce_max(acc_s, scores_max, dim=1, clear=False)
            for i in T.Parallel(block_M):
                scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
            for i in T.Parallel(block_M):
                scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            T.reduce_sum(acc_s, scores_sum, dim=1)
            for i in T.Parallel(block_M):
                logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            T.copy(acc_s, acc_s_cast)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] *= scores_scale[i]

            if layout == "bshd":
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by // group, :], V_shared)
            else:
                T.copy(V[bz, by // group, k * block_N:(k + 1) * block_N, :], V_shared)
            T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] /= logsum[i]
        if LSE is not None:       # the log-sum-exp of the scaled scores (natural log)
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_len:
                    LSE[bz, by, bx * block_M + i] = (
                        scores_max[i] * scale + T.log2(logsum[i])) * 0.6931471805599453
        T.copy(acc_o, O_shared)
        if layout == "bshd":
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
        else:
            T.copy(O_shared, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])


def reference(q, k, v, causal, layout="bshd"):
    """torch SDPA in float32 on upcast inputs (bshd → bhsd and back; K/V heads repeated
    for grouped-query attention)."""
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                           is_causal=causal)
    return out.transpose(1, 2) if layout == "bshd" else out


PTX_EXAMPLES = [
    (flashattn, [((1, 256, 2, 64), "float16")] * 4, {},
     ["mma.sync.aligned.m16n8k16", "ldmatrix", "cp.async", "shfl.sync.bfly"]),
    (flashattn, [((1, 256, 2, 64), "float16")] * 4, {"is_causal": True},
     ["mma.sync.aligned.m16n8k16", "ldmatrix", "cp.async", "shfl.sync.bfly"]),
]


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    b, s, h, d = (4, 1000, 8, 128) if device == "cuda" else (1, 100, 2, 64)
    q, k, v = (torch.randn(b, s, h, d, device=device, dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        o = torch.empty_like(q)
        flashattn(q, k, v, o, is_causal=causal)
        err = (o.float() - reference(q, k, v, causal)).abs().max().item()
        ok = err < 2e-2
        print(f"flashattn b{b} s{s} h{h} d{d} causal={causal} on the {where}: "
              f"max |error| = {err:.2e}, {'passed' if ok else 'FAILED'}")
        assert ok


if __name__ == "__main__":
    main()

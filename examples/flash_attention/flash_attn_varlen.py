"""FlashAttention forward over a batch of sequences of different lengths, packed without
padding (the seeds' varlen layout): Q is [total_q, heads, dim], K and V are
[total_k, kv_heads, dim], and sequence b holds rows cu_seqlens_q[b] … cu_seqlens_q[b+1]-1
of Q (cu_seqlens_k likewise for K and V). The grid is sized by max_seqlen_q; a block whose
rows lie past its sequence's end does nothing, and the last block of a sequence masks the
rows and keys past the end (the copies read into the next sequence's rows, which the
masks drop). Causal attention is aligned to the bottom right (query i of a sequence sees
the keys up to i + len_k - len_q), as FlashAttention 2.1 and later define it; grouped-query
attention as in flash_attn.py.

    python examples/flash_attention/flash_attn_varlen.py
"""
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def flashattn_varlen(Q, K, V, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, Output,
                     is_causal: T.constexpr = False, block_M: T.constexpr = 64,
                     block_N: T.constexpr = 64, num_stages: T.constexpr = 2,
                     threads: T.constexpr = 128):
    total_q, heads, dim = Q.shape
    kv_heads = K.shape[1]
    batch = cu_seqlens_q.shape[0] - 1
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(d) * log2(e)
    dtype = Q.dtype
    accum_dtype = T.float32
    with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch, threads=threads) as (
            bx, by, bz):
        Q_shared = T.alloc_shared([block_M, dim], dtype)
        K_shared = T.alloc_shared([block_N, dim], dtype)
        V_shared = T.alloc_shared([block_N, dim], dtype)
        acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
        acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
        acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
        scores_max = T.alloc_fragment([block_M], accum_dtype)
        scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
        scores_scale = T.alloc_fragment([block_M], accum_dtype)
        scores_sum = T.alloc_fragment([block_M], accum_dtype)
        logsum = T.alloc_fragment([block_M], accum_dtype)

        q_start = cu_seqlens_q[bz]
        q_len = cu_seqlens_q[bz + 1] - q_start
        k_start = cu_seqlens_k[bz]
        k_len = cu_seqlens_k[bz + 1] - k_start
        if bx * block_M < q_len:
            T.copy(Q[q_start + bx * block_M:q_start + (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            # causal: the last key the block's last row sees (bottom-right aligned)
            loop_range = (
                T.max(0, T.min(T.ceildiv(k_len, block_N),
                               T.ceildiv((bx + 1) * block_M + k_len - q_len, block_N)))
                if is_causal else T.ceildiv(k_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[k_start + k * block_N:k_start + (k + 1) * block_N, by // group, :],
                       K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    key = k * block_N + j
                    visible = key < k_len
                    if is_causal:
                        visible = visible and key <= bx * block_M + i + k_len - q_len
                    acc_s[i, j] = T.if_then_else(visible, acc_s[i, j],
                                                 -T.infinity(acc_s.dtype))
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                # a row that has seen no key yet keeps max -inf: scale by 1, add 0
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.if_then_else(
                        scores_max[i] == -T.infinity(accum_dtype), 1.0,
                        T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale))
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        scores_max[i] == -T.infinity(accum_dtype), 0.0,
                        T.exp2(acc_s[i, j] * scale - scores_max[i] * scale))
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[k_start + k * block_N:k_start + (k + 1) * block_N, by // group, :],
                       V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            # rows that see no key at all (causal, len_k < len_q) give 0, as the
            # reference's convention below
            for i, j in T.Parallel(block_M, dim):
                row = bx * block_M + i
                if row < q_len:
                    Output[q_start + row, by, j] = T.if_then_else(
                        logsum[i] > 0, acc_o[i, j] / logsum[i], 0.0)


def reference(q, k, v, cu_q, cu_k, causal):
    """Sequence by sequence in float64 (bottom-right causal; rows with no visible key 0)."""
    out = torch.zeros_like(q, dtype=torch.float64)
    group = q.shape[1] // k.shape[1]
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        qb = q[qs:qe].double().transpose(0, 1)
        kb = k[ks:ke].double().repeat_interleave(group, dim=1).transpose(0, 1)
        vb = v[ks:ke].double().repeat_interleave(group, dim=1).transpose(0, 1)
        s = qb @ kb.transpose(1, 2) / q.shape[-1] ** 0.5
        if causal:
            lq, lk = qe - qs, ke - ks
            keep = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + lk - lq
            s = s.masked_fill(~keep.to(s.device), float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        out[qs:qe] = (p @ vb).transpose(0, 1)
    return out


def packed_inputs(lens_q, lens_k, heads, kv_heads, dim, device, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), heads, dim, generator=g).to(dtype).to(device)
    k = torch.randn(int(cu_k[-1]), kv_heads, dim, generator=g).to(dtype).to(device)
    v = torch.randn(int(cu_k[-1]), kv_heads, dim, generator=g).to(dtype).to(device)
    return q, k, v, cu_q.to(device), cu_k.to(device)


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    if device == "cuda":
        lens_q, lens_k, heads, kv_heads, dim = [1000, 17, 513, 2048], [1000, 17, 600, 2048], \
            16, 4, 128
    else:
        lens_q, lens_k, heads, kv_heads, dim = [70, 5, 33], [70, 9, 20], 4, 2, 64
    ok = True
    for causal in (False, True):
        q, k, v, cu_q, cu_k = packed_inputs(lens_q, lens_k, heads, kv_heads, dim, device)
        out = torch.empty_like(q)
        flashattn_varlen(q, k, v, cu_q, cu_k, max(lens_q), out, is_causal=causal)
        ref = reference(q.cpu(), k.cpu(), v.cpu(), cu_q.cpu(), cu_k.cpu(), causal)
        err = (out.double().cpu() - ref).abs().max().item()
        passed = err < 1e-2
        ok = ok and passed
        print(f"varlen attention, lengths q {lens_q} k {lens_k}, heads {heads}/{kv_heads}, "
              f"d{dim}, causal={causal}, fp16 on the {where}: max |error| vs float64 = "
              f"{err:.1e}, {'passed' if passed else 'FAILED'}")
    assert ok


PTX_EXAMPLES = [
    (flashattn_varlen, [((512, 4, 64), "float16"), ((512, 2, 64), "float16"),
                        ((512, 2, 64), "float16"), ((3,), "int32"), ((3,), "int32"), 300,
                        ((512, 4, 64), "float16")],
     {"is_causal": True}, ["mma.sync.aligned.m16n8k16", "shfl.sync.bfly"]),
]


if __name__ == "__main__":
    main()

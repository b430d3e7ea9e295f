"""FlashAttention backward (FlashAttention-2's algorithm) as tile kernels, and a
``torch.autograd.Function`` that trains with the forward of ``flash_attn.py``.

With S = Q K^T / sqrt(d), P = softmax(S) (rows) and O = P V, for an upstream gradient dO:

    D_i  = sum_d dO[i, d] O[i, d]                 (flashattn_bwd_preprocess)
    P    = exp(S - LSE)                           (LSE from the forward)
    dV  += P^T dO,  dP = dO V^T,  dS = P * (dP - D)
    dK  += dS^T Q / sqrt(d),  dQ += dS K / sqrt(d) (flashattn_bwd)

``flashattn_bwd`` runs one block per (key/value block, head, batch): it keeps its K and V
tile in shared memory and its dK and dV in registers while it walks the query blocks
(causal: only those at or below the diagonal), computing the transposed scores
S^T = K Q^T so that P^T and dS^T are already in the accumulator layout the next gemm
takes as its A operand from registers; dQ is accumulated across key blocks with float32
atomics. The bshd layout (batch, seq, heads, dim); Q, K and V with the same heads.

    python examples/flash_attention/flash_attn_bwd.py
"""
import torch

import tilejit
import tilejit.language as T

try:                                    # run as a script, beside flash_attn.py
    from flash_attn import flashattn
except ImportError:                     # imported as flash_attention.flash_attn_bwd
    from flash_attention.flash_attn import flashattn

LOG2E = 1.4426950408889634


@tilejit.kernel
def flashattn_bwd_preprocess(Out, dO, Delta, block_M: T.constexpr = 64,
                             threads: T.constexpr = 128):
    """Delta[b, h, s] = sum over d of Out * dO (float32)."""
    batch, seq_len, heads, dim = Out.shape
    with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
        o = T.alloc_fragment([block_M, dim], T.float32)
        do = T.alloc_fragment([block_M, dim], T.float32)
        acc = T.alloc_fragment([block_M], T.float32)
        T.copy(Out[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
        T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
        for i, j in T.Parallel(block_M, dim):
            o[i, j] = o[i, j] * do[i, j]
        T.reduce_sum(o, acc, dim=1)
        for i in T.Parallel(block_M):
            if bx * block_M + i < seq_len:
                Delta[bz, by, bx * block_M + i] = acc[i]


@tilejit.kernel
def flashattn_bwd(Q, K, V, dO, LSE, Delta, dQ, dK, dV, is_causal: T.constexpr = False,
                  block_M: T.constexpr = 64, block_N: T.constexpr = 64,
                  threads: T.constexpr = 128, num_stages: T.constexpr = 2):
    """dK, dV (Q's dtype) for this block of block_N keys; dQ (float32, zeroed by the
    caller) accumulated with atomics. The loop over the block_M-row query blocks is
    software-pipelined: the next blocks' Q, dO, LSE and Delta load while this one
    computes. Causal, the blocks are launched heaviest first within groups of four
    (head, batch) pairs (see the kernel's body)."""
    batch, seq_len, heads, dim = Q.shape
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E            # exp(x * sm_scale) = exp2(x * scale)
    dtype = Q.dtype
    nb = T.ceildiv(seq_len, block_N)
    with T.Kernel(nb, heads, batch, threads=threads) as (bx, by, bz):
        if is_causal and (heads * batch) % 4 == 0:
            # causal: a block of keys reaches the query blocks from the diagonal on, so
            # the first blocks do the most; launched in the usual order the last wave
            # holds heavy blocks and its SMs finish late. The launch order is taken in
            # groups of four (head, batch) pairs (one wave of blocks, sharing Q and dO in
            # L2), heaviest key blocks first within a group
            lin = bx + nb * (by + heads * bz)
            w = lin % (4 * nb)
            pair = lin // (4 * nb) * 4 + w % 4
            bx = w // 4
            by = pair % heads
            bz = pair // heads
        K_shared = T.alloc_shared([block_N, dim], dtype)
        V_shared = T.alloc_shared([block_N, dim], dtype)
        Q_shared = T.alloc_shared([block_M, dim], dtype)
        dO_shared = T.alloc_shared([block_M, dim], dtype)
        dsT_shared = T.alloc_shared([block_N, block_M], dtype)
        lse_shared = T.alloc_shared([block_M], T.float32)
        delta_shared = T.alloc_shared([block_M], T.float32)
        qkT = T.alloc_fragment([block_N, block_M], T.float32)
        dpT = T.alloc_fragment([block_N, block_M], T.float32)
        pT_cast = T.alloc_fragment([block_N, block_M], dtype)
        dsT_cast = T.alloc_fragment([block_N, block_M], dtype)
        dv = T.alloc_fragment([block_N, dim], T.float32)
        dk = T.alloc_fragment([block_N, dim], T.float32)
        dq = T.alloc_fragment([block_M, dim], T.float32)

        T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], K_shared)
        T.copy(V[bz, bx * block_N:(bx + 1) * block_N, by, :], V_shared)
        T.clear(dv)
        T.clear(dk)
        # causal: the query blocks that reach this block of keys
        first = (bx * block_N) // block_M if is_causal else 0
        for i in T.Pipelined(first, T.ceildiv(seq_len, block_M), num_stages=num_stages):
            T.copy(Q[bz, i * block_M:(i + 1) * block_M, by, :], Q_shared)
            T.copy(dO[bz, i * block_M:(i + 1) * block_M, by, :], dO_shared)
            T.copy(LSE[bz, by, i * block_M:(i + 1) * block_M], lse_shared)
            T.copy(Delta[bz, by, i * block_M:(i + 1) * block_M], delta_shared)
            T.clear(qkT)
            T.gemm(K_shared, Q_shared, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            # P^T[n, m] = exp(S[m, n] - LSE[m]), zero where m is masked (causal, the tail);
            # only the blocks on the diagonal or past the sequence's end test each element
            if (i + 1) * block_M <= seq_len and (
                    not is_causal or i * block_M >= (bx + 1) * block_N - 1):
                for n, m in T.Parallel(block_N, block_M):
                    qkT[n, m] = T.exp2(qkT[n, m] * scale - lse_shared[m] * LOG2E)
            else:
                for n, m in T.Parallel(block_N, block_M):
                    row = i * block_M + m
                    keep = row < seq_len
                    if is_causal:
                        keep = keep and bx * block_N + n <= row
                    qkT[n, m] = T.if_then_else(
                        keep, T.exp2(qkT[n, m] * scale - lse_shared[m] * LOG2E), 0.0)
            T.copy(qkT, pT_cast)
            T.gemm(pT_cast, dO_shared, dv, policy=T.GemmWarpPolicy.FullRow)
            T.clear(dpT)
            T.gemm(V_shared, dO_shared, dpT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            # dS^T, scaled by sm_scale here once for both dK and dQ (written so that the
            # scaling and the subtraction are one fused multiply-add)
            for n, m in T.Parallel(block_N, block_M):
                dpT[n, m] = qkT[n, m] * (dpT[n, m] * sm_scale - delta_shared[m] * sm_scale)
            T.copy(dpT, dsT_cast)
            T.gemm(dsT_cast, Q_shared, dk, policy=T.GemmWarpPolicy.FullRow)
            T.copy(dsT_cast, dsT_shared)
            T.clear(dq)
            T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
            # rows past the sequence's end are skipped
            T.atomic_add(dQ[bz, i * block_M:(i + 1) * block_M, by, :], dq)
        T.copy(dv, dV[bz, bx * block_N:(bx + 1) * block_N, by, :])
        T.copy(dk, dK[bz, bx * block_N:(bx + 1) * block_N, by, :])


def attention_backward(q, k, v, out, lse, dout, causal, block_M=64, block_N=None,
                       threads=None, num_stages=2):
    """(dq, dk, dv) for bshd tensors, given the forward's output and log-sum-exp;
    block_M query rows by block_N keys. Head dims above 64 take 256 threads: at 128 the
    five accumulators of a 64 x 64 block need 288 registers a thread with 128 threads.
    At head dim 128 the key blocks are 128 long (64 x 128 at 256 threads was the fastest
    of benchmarks/attention_bwd.py's shapes on the H200, 1.07-1.11x FA2's backward at
    b4 h32 s4096, though ptxas spills ~350 bytes a thread); 64 at the others."""
    b, s, h, d = q.shape
    threads = threads or (128 if d <= 64 else 256)
    block_N = block_N or (128 if d == 128 else 64)
    delta = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
    flashattn_bwd_preprocess(out, dout, delta, block_M=block_M, threads=threads)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    flashattn_bwd(q, k, v, dout, lse, delta, dq, dk, dv, is_causal=causal, block_M=block_M,
                  block_N=block_N, threads=threads, num_stages=num_stages)
    return dq.to(q.dtype), dk, dv


def forward_blocks(q) -> dict:
    """The forward's block shape: on Hopper at head dim 128, 192 query rows by 96 keys
    with three consumer warpgroups (the fastest of benchmarks/run.py attention's shapes
    on the H200); 64 x 64 elsewhere."""
    hopper = q.is_cuda and torch.cuda.get_device_capability(q.device) >= (9, 0)
    if hopper and q.shape[-1] == 128:
        return dict(block_M=192, block_N=96, threads=384, num_stages=2)
    return dict(block_M=64, block_N=64)


class FlashAttention(torch.autograd.Function):
    """softmax(Q K^T / sqrt(d)) V on bshd tensors, forward and backward in tilejit."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        b, s, h, d = q.shape
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
        flashattn(q, k, v, out, lse, is_causal=causal, **forward_blocks(q))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, out, lse, dout.contiguous(), ctx.causal)
        return dq, dk, dv, None


def reference_grads(q, k, v, dout, causal):
    """torch autograd in float64 (bshd)."""
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(
        q64.transpose(1, 2), k64.transpose(1, 2), v64.transpose(1, 2),
        is_causal=causal).transpose(1, 2)
    o.backward(dout.double())
    return q64.grad, k64.grad, v64.grad


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    b, s, h, d = (2, 1000, 8, 64) if device == "cuda" else (1, 100, 2, 64)
    ok = True
    for causal in (False, True):
        q, k, v = (torch.randn(b, s, h, d, device=device, dtype=torch.float16,
                               requires_grad=True) for _ in range(3))
        dout = torch.randn(b, s, h, d, device=device, dtype=torch.float16)
        out = FlashAttention.apply(q, k, v, causal)
        out.backward(dout)
        refs = reference_grads(q, k, v, dout, causal)
        errs = [((g.double() - r).norm() / r.norm()).item()
                for g, r in zip((q.grad, k.grad, v.grad), refs)]
        passed = all(e < 2e-2 for e in errs)
        ok = ok and passed
        print(f"attention backward b{b} s{s} h{h} d{d} causal={causal} fp16 on the {where}: "
              f"relative error of dq, dk, dv vs float64 autograd = "
              f"{', '.join(f'{e:.1e}' for e in errs)}, {'passed' if passed else 'FAILED'}")
    assert ok


PTX_EXAMPLES = [
    (flashattn_bwd_preprocess, [((1, 256, 2, 64), "float16")] * 2 + [((1, 2, 256), "float32")],
     {}, ["shfl.sync.bfly"]),
    (flashattn_bwd, [((1, 256, 2, 64), "float16")] * 4 + [((1, 2, 256), "float32")] * 2
     + [((1, 256, 2, 64), "float32")] + [((1, 256, 2, 64), "float16")] * 2,
     {"is_causal": True}, ["mma.sync.aligned.m16n8k16", "atom.global.add.f32"]),
]


if __name__ == "__main__":
    main()

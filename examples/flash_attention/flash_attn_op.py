"""FlashAttention as a PyTorch operator that trains and that ``torch.compile`` traces:
the forward kernel (flash_attn.py) and the backward's two kernels (flash_attn_bwd.py) as
``tilejit.torch.custom_op`` operators whose results the operators allocate
(``outputs=``), and the backward registered on the forward with
``torch.library.register_autograd``. Every piece is an operator, so the whole training
step, backward included, is one graph.

    out = flash_attention(q, k, v, causal=True)     # bshd tensors; q.requires_grad works

    python examples/flash_attention/flash_attn_op.py
"""
import torch

import tilejit.torch as tjt

try:                                    # run as a script, beside flash_attn.py
    from flash_attn import flashattn
    from flash_attn_bwd import flashattn_bwd, flashattn_bwd_preprocess, reference_grads
except ImportError:                     # imported as flash_attention.flash_attn_op
    from flash_attention.flash_attn import flashattn
    from flash_attention.flash_attn_bwd import (flashattn_bwd, flashattn_bwd_preprocess,
                                                reference_grads)

NAMESPACE = "tilejit_examples"
# the forward's blocks (two consumer warpgroups on sm_90a) and the backward's (32-query
# blocks: the fastest of run.py attention_bwd on the H200, 0.85-0.89 of FA2)
FORWARD_CONFIG = dict(block_M=128, block_N=128, threads=256, num_stages=2)
BACKWARD_CONFIG = dict(block_M=32, block_N=128, threads=256, num_stages=2)


def _row_stats(t, **_):
    """A float32 (batch, heads, seq) tensor for a bshd ``t``: LSE, Delta."""
    b, s, h, _d = t.shape
    return t.new_empty((b, h, s), dtype=torch.float32)


def _ops(causal):
    tag = "_causal" if causal else ""
    forward = tjt.custom_op(
        f"{NAMESPACE}::flash_attention{tag}", flashattn,
        constexprs=dict(FORWARD_CONFIG, is_causal=causal),
        outputs={"Output": lambda Q, **_: torch.empty_like(Q),
                 "LSE": lambda Q, **_: _row_stats(Q)})
    preprocess = tjt.custom_op(
        f"{NAMESPACE}::flash_attention_bwd_preprocess{tag}", flashattn_bwd_preprocess,
        constexprs=dict(block_M=BACKWARD_CONFIG["block_M"],
                        threads=BACKWARD_CONFIG["threads"]),
        outputs={"Delta": lambda Out, **_: _row_stats(Out)})
    backward = tjt.custom_op(
        f"{NAMESPACE}::flash_attention_bwd{tag}", flashattn_bwd,
        constexprs=dict(BACKWARD_CONFIG, is_causal=causal),
        outputs={"dQ": lambda Q, **_: torch.zeros(Q.shape, dtype=torch.float32,
                                                  device=Q.device),
                 "dK": lambda K, **_: torch.empty_like(K),
                 "dV": lambda V, **_: torch.empty_like(V)})

    def setup_context(ctx, inputs, output):
        q, k, v = inputs
        out, lse = output
        ctx.save_for_backward(q, k, v, out, lse)

    def grads(ctx, grad_out, grad_lse):
        q, k, v, out, lse = ctx.saved_tensors
        dout = grad_out.contiguous()
        delta = preprocess(out, dout)
        dq, dk, dv = backward(q, k, v, dout, lse, delta)
        return dq.to(q.dtype), dk, dv

    torch.library.register_autograd(f"{NAMESPACE}::flash_attention{tag}", grads,
                                    setup_context=setup_context)
    return forward


FLASH_ATTENTION = {causal: _ops(causal) for causal in (False, True)}


def flash_attention(q, k, v, causal=False):
    """softmax(Q K^T / sqrt(d)) V for bshd tensors, differentiable."""
    out, _lse = FLASH_ATTENTION[bool(causal)](q, k, v)
    return out


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    b, s, h, d = (2, 1000, 8, 128) if device == "cuda" else (1, 100, 2, 32)
    for causal in (False, True):
        q, k, v = (torch.randn(b, s, h, d, device=device, dtype=torch.float16,
                               requires_grad=True) for _ in range(3))
        dout = torch.randn(b, s, h, d, device=device, dtype=torch.float16)
        step = torch.compile(lambda q, k, v, causal=causal: flash_attention(q, k, v, causal),
                             fullgraph=True, backend="aot_eager")
        step(q, k, v).backward(dout)
        refs = reference_grads(q, k, v, dout, causal)
        errs = [((g.double() - r).norm() / r.norm()).item()
                for g, r in zip((q.grad, k.grad, v.grad), refs)]
        ok = all(e < 2e-2 for e in errs)
        print(f"flash_attention op under torch.compile(fullgraph=True), b{b} s{s} h{h} d{d} "
              f"causal={causal} on the {where}: relative error of dq, dk, dv = "
              f"{', '.join(f'{e:.1e}' for e in errs)}, {'passed' if ok else 'FAILED'}")
        assert ok


if __name__ == "__main__":
    main()

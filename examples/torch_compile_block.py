"""A transformer block built from tilejit kernels registered as PyTorch custom operators,
under ``torch.compile(fullgraph=True)`` and replayed from a CUDA graph: RMSNorm
(examples/norms.py), causal FlashAttention with its backward registered
(examples/flash_attention/flash_attn_op.py), and the GEMM with a fused bias + ReLU
epilogue (examples/gemm_epilogue.py); torch's own matmuls project and add the residuals.

    python examples/torch_compile_block.py [--json FILE]   # the GPU when there is one

It checks, in this order: no graph break (``torch._dynamo.explain``); the compiled block
against the eager one and both against a float64 reference; on the GPU, a CUDA graph of
the compiled block captured once, fed new inputs through its static input and replayed,
against the eager block on those inputs; then the step times of the three.

The norm and the GEMM write into tensors the block allocates (the operators declare those
arguments mutated; torch.compile functionalizes them); the attention operator allocates
its own results (``outputs=``).
"""
import argparse
import json
import math

import torch

import tilejit.torch as tjt
from flash_attention.flash_attn_op import flash_attention
from gemm_epilogue import matmul_bias_relu
from norms import rms_norm

rms_norm_op = tjt.custom_op("tilejit_examples::rms_norm", rms_norm, scalars={"eps": float})
gemm_bias_relu_op = tjt.custom_op("tilejit_examples::gemm_bias_relu", matmul_bias_relu,
                                  constexprs={"block_K": 64})
EPS = 1e-6


class Block(torch.nn.Module):
    def __init__(self, dim, heads, hidden, dtype, device):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.heads = heads

        def param(*shape, scale=1.0, dtype=dtype):
            return torch.nn.Parameter(
                (torch.randn(*shape, generator=g) * scale).to(dtype).to(device),
                requires_grad=False)
        self.norm1, self.norm2 = param(dim), param(dim)
        self.qkv = param(dim, 3 * dim, scale=dim ** -0.5)
        self.out = param(dim, dim, scale=dim ** -0.5)
        self.up = param(dim, hidden, scale=dim ** -0.5)
        self.bias = param(hidden, dtype=torch.float32)
        self.down = param(hidden, dim, scale=hidden ** -0.5)

    def forward(self, x):                      # x: (batch, seq, dim)
        b, s, d = x.shape
        rows = x.reshape(b * s, d)
        h = torch.empty_like(rows)
        rms_norm_op(rows, self.norm1, h, EPS)
        q, k, v = (t.contiguous() for t in
                   (h @ self.qkv).view(b, s, 3, self.heads, d // self.heads).unbind(2))
        a = flash_attention(q, k, v, causal=True)
        rows = rows + a.reshape(b * s, d) @ self.out
        h2 = torch.empty_like(rows)
        rms_norm_op(rows, self.norm2, h2, EPS)
        u = torch.empty(b * s, self.up.shape[1], dtype=x.dtype, device=x.device)
        gemm_bias_relu_op(h2, self.up, self.bias, u)
        return (rows + u @ self.down).view(b, s, d)


def reference(block, x):
    """The same block in float64 with torch only (the kernels' rounding points kept)."""
    b, s, d = x.shape
    lo = x.dtype

    def norm(t, w):
        t = t.double()
        return (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * w.double()).to(lo)

    rows = x.reshape(b * s, d)
    qkv = (norm(rows, block.norm1).double() @ block.qkv.double()).to(lo).double()
    q, k, v = qkv.view(b, s, 3, block.heads, d // block.heads).unbind(2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // block.heads)
    mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
    p = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    a = torch.einsum("bhqk,bkhd->bqhd", p, v).to(lo).reshape(b * s, d).double()
    rows = (rows.double() + (a @ block.out.double()).to(lo).double()).to(lo)
    u = torch.relu(norm(rows, block.norm2).double() @ block.up.double() + block.bias.double())
    out = rows.double() + (u.to(lo).double() @ block.down.double()).to(lo).double()
    return out.view(b, s, d)


def graph_replay(compiled, x, fresh):
    """Capture ``compiled`` on a static input once, copy ``fresh`` into it, replay."""
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            compiled(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = compiled(static_x)
    static_x.copy_(fresh)
    graph.replay()
    return graph, static_out


def main(argv=()):
    """``argv`` defaults to none (the tests call main()); the script passes its own."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the checks and step times to this file")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    batch, seq, dim, heads, hidden = ((4, 2048, 2048, 16, 8192) if device == "cuda"
                                      else (1, 40, 64, 2, 128))
    block = Block(dim, heads, hidden, torch.float16, device)
    x = torch.randn(batch, seq, dim, dtype=torch.float16, device=device)
    explained = torch._dynamo.explain(block)(x)
    compiled = torch.compile(block, fullgraph=True,
                             backend="inductor" if device == "cuda" else "aot_eager")
    eager, out = block(x), compiled(x)
    ref = reference(block, x)
    tol = 2e-2 * (1 + ref.abs().max().item())
    err = max((out.double() - ref).abs().max().item(),
              (eager.double() - ref).abs().max().item())
    diff = (out.double() - eager.double()).abs().max().item()
    result = {"shape": dict(batch=batch, seq=seq, dim=dim, heads=heads, hidden=hidden),
              "where": where, "graphs": explained.graph_count,
              "graph_breaks": explained.graph_break_count,
              "max_err_vs_float64": err, "compiled_vs_eager_max_diff": diff}
    ok = explained.graph_break_count == 0 and err < tol
    if device == "cuda":
        fresh = torch.randn_like(x)
        graph, replayed = graph_replay(compiled, x, fresh)
        eager_fresh = block(fresh)
        result["graph_replay_vs_eager_max_diff"] = (
            replayed.double() - eager_fresh.double()).abs().max().item()
        ok = ok and result["graph_replay_vs_eager_max_diff"] < tol
        from triton.testing import do_bench
        result["step_us"] = {"eager": do_bench(lambda: block(x)) * 1e3,
                             "compiled": do_bench(lambda: compiled(x)) * 1e3,
                             "cuda_graph_replay": do_bench(graph.replay) * 1e3}
    print(f"transformer block b{batch} s{seq} dim {dim} heads {heads} hidden {hidden} fp16 "
          f"on the {where} under torch.compile(fullgraph=True): {explained.graph_count} "
          f"graph, {explained.graph_break_count} graph breaks, max |error| vs float64 "
          f"{err:.2e}, compiled - eager {diff:.2e}"
          + (f", CUDA graph replay on new inputs - eager "
             f"{result['graph_replay_vs_eager_max_diff']:.2e}; step time (us) "
             + ", ".join(f"{k} {v:.0f}" for k, v in result["step_us"].items())
             if device == "cuda" else "")
          + f": {'passed' if ok else 'FAILED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    assert ok


# the kernels are the norms, gemm_epilogue and flash_attn examples' (PTX checked there)
PTX_EXAMPLES = []


if __name__ == "__main__":
    main(None)

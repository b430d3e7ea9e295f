"""An MLP block built from tilejit kernels registered as PyTorch custom operators, under
``torch.compile(fullgraph=True)``: RMSNorm (examples/norms.py), then the GEMM with a fused
bias + ReLU epilogue (examples/gemm_epilogue.py), then torch's own matmul and residual.

    python examples/torch_compile_mlp.py      # on the GPU when there is one, else simulated

The kernels write their outputs into tensors the model allocates, so the operators are
declared as mutating those arguments; torch.compile functionalizes that and traces the
operators through their fake implementations (tilejit/torch.py): one graph, no break.
"""
import torch

import tilejit.torch as tjt
from gemm_epilogue import matmul_bias_relu
from norms import rms_norm

rms_norm_op = tjt.custom_op("tilejit_examples::rms_norm", rms_norm, scalars={"eps": float})
gemm_bias_relu_op = tjt.custom_op("tilejit_examples::gemm_bias_relu", matmul_bias_relu,
                                  constexprs={"block_K": 64})


class MLP(torch.nn.Module):
    def __init__(self, dim, hidden, dtype, device):
        super().__init__()
        g = torch.Generator().manual_seed(0)

        def param(*shape, scale=1.0):
            return torch.nn.Parameter(
                (torch.randn(*shape, generator=g) * scale).to(dtype).to(device),
                requires_grad=False)
        self.norm = param(dim)
        self.up = param(dim, hidden, scale=dim ** -0.5)
        self.bias = torch.nn.Parameter(torch.randn(hidden, generator=g).float().to(device),
                                       requires_grad=False)
        self.down = param(hidden, dim, scale=hidden ** -0.5)

    def forward(self, x):
        h = torch.empty_like(x)
        rms_norm_op(x, self.norm, h, 1e-6)
        u = torch.empty(x.shape[0], self.up.shape[1], dtype=x.dtype, device=x.device)
        gemm_bias_relu_op(h, self.up, self.bias, u)
        return x + u @ self.down


def reference(model, x):
    """The same block in float64 with torch only."""
    xd = x.double()
    h = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * model.norm.double()
    u = torch.relu(h.to(x.dtype).double() @ model.up.double() + model.bias.double())
    return xd + u.to(x.dtype).double() @ model.down.double()


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU ({torch.cuda.get_device_name()})" if device == "cuda" else "simulator"
    tokens, dim, hidden = (4096, 1024, 4096) if device == "cuda" else (64, 128, 256)
    model = MLP(dim, hidden, torch.float16, device)
    x = torch.randn(tokens, dim, dtype=torch.float16, device=device)
    explained = torch._dynamo.explain(model)(x)
    compiled = torch.compile(model, fullgraph=True,
                             backend="inductor" if device == "cuda" else "aot_eager")
    eager, out = model(x), compiled(x)
    ref = reference(model, x)
    err = max((out.double() - ref).abs().max().item(), (eager.double() - ref).abs().max().item())
    same = torch.equal(out, eager)
    ok = explained.graph_break_count == 0 and err < 5e-2 * (1 + ref.abs().max().item())
    print(f"MLP block {tokens}x{dim}x{hidden} fp16 on the {where} under torch.compile("
          f"fullgraph=True): {explained.graph_count} graph, {explained.graph_break_count} "
          f"graph breaks, compiled {'==' if same else '!='} eager, max |error| vs float64 "
          f"= {err:.2e}, {'passed' if ok else 'FAILED'}")
    if device == "cuda":
        from triton.testing import do_bench
        t_eager = do_bench(lambda: model(x))
        t_compiled = do_bench(lambda: compiled(x))
        print(f"step time: eager {t_eager * 1e3:.1f} us, compiled {t_compiled * 1e3:.1f} us")
    assert ok


# the kernels are the norms and gemm_epilogue examples' (their PTX is checked there)
PTX_EXAMPLES = []


if __name__ == "__main__":
    main()

"""The foundation's kernels on the GPU, each checked against torch (float64 where it
matters) and against the simulator on the same inputs."""
import pytest

import tilejit
import tilejit.language as T
from elementwise_2d import scale_bias
from vector_add import relu, vector_add

pytestmark = pytest.mark.gpu


def _torch():
    import torch
    return torch


def simulate(kernel, *args, **kw):
    """Run `kernel` in the simulator on CPU copies of the arguments; return them."""
    torch = _torch()
    host = [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
    kernel(*host, **kw)
    return host


DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8"]


@pytest.mark.parametrize("n", [1, 1000, 4096, 1_000_003])
def test_vector_add(n):
    torch = _torch()
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    vector_add(a, b, c)
    torch.cuda.synchronize()
    ref = (a.double() + b.double()).float()
    torch.testing.assert_close(c, ref, rtol=0, atol=0)
    sim = simulate(vector_add, a, b, torch.zeros_like(a))
    torch.testing.assert_close(c.cpu(), sim[2], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_add_each_dtype(dtype):
    torch = _torch()
    tdt = getattr(torch, dtype)
    if tdt.is_floating_point:
        a = torch.randn(5000, device="cuda").to(tdt)
        b = torch.randn(5000, device="cuda").to(tdt)
    else:
        a = torch.randint(0, 50, (5000,), device="cuda").to(tdt)
        b = torch.randint(0, 50, (5000,), device="cuda").to(tdt)
    c = torch.zeros_like(a)
    vector_add(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    sim = simulate(vector_add, a, b, torch.zeros_like(a))
    torch.testing.assert_close(c.cpu(), sim[2], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_relu(dtype):
    torch = _torch()
    x = torch.randn(100_001, device="cuda").to(getattr(torch, dtype))
    y = torch.full_like(x, float("nan"))
    relu(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.relu(x), rtol=0, atol=0)
    sim = simulate(relu, x, torch.zeros_like(x))
    torch.testing.assert_close(y.cpu(), sim[1], rtol=0, atol=0)


@pytest.mark.parametrize("transpose", [False, True])
def test_2d_strided_and_runtime_scalar(transpose):
    torch = _torch()
    x = torch.randn(300, 257, device="cuda")
    if transpose:
        x = x.t()                       # (257, 300), strides (1, 257)
    bias = torch.randn(x.shape[1], device="cuda")
    y = torch.full(x.shape, float("nan"), device="cuda")
    for alpha in (0.5, -3.0):
        scale_bias(x, bias, y, alpha)
        torch.cuda.synchronize()
        ref = (x.double() * alpha + bias.double()).float()
        torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6)
    sim = simulate(scale_bias, x, bias, torch.zeros(x.shape), -3.0)
    torch.testing.assert_close(y.cpu(), sim[2], rtol=1e-6, atol=1e-6)


def test_misaligned_view_uses_scalar_variant():
    torch = _torch()
    base = torch.randn(4097, device="cuda")
    a = base[1:]                         # 4-byte aligned only
    b = torch.randn(4096, device="cuda")
    c = torch.zeros(4096, device="cuda")
    vector_add(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    sim = simulate(vector_add, a, b, torch.zeros(4096, device="cuda"))
    torch.testing.assert_close(c.cpu(), sim[2], rtol=0, atol=0)


def test_constexpr_respecialization():
    torch = _torch()
    a = torch.randn(10_000, device="cuda")
    for block in (256, 512, 2048):
        c = torch.zeros_like(a)
        vector_add(a, a, c, block=block)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + a, rtol=0, atol=0)
        sim = simulate(vector_add, a, a, torch.zeros_like(a), block=block)
        torch.testing.assert_close(c.cpu(), sim[2], rtol=0, atol=0)


def test_grid_3d_and_if_then_else():
    torch = _torch()

    @tilejit.kernel
    def clamp3(X, Y, lo):
        B, M, N = X.shape
        with T.Kernel(T.ceildiv(N, 64), M, B, threads=64) as (bx, by, bz):
            for j in T.Parallel(64):
                c = bx * 64 + j
                if c < N:
                    Y[bz, by, c] = T.if_then_else(X[bz, by, c] < lo, lo, X[bz, by, c])

    x = torch.randn(3, 5, 200, device="cuda")
    y = torch.zeros_like(x)
    clamp3(x, y, -0.5)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.clamp(x, min=-0.5), rtol=0, atol=0)
    sim = simulate(clamp3, x, torch.zeros_like(x), -0.5)
    torch.testing.assert_close(y.cpu(), sim[1], rtol=0, atol=0)


def test_compiled_handle_reports_registers():
    torch = _torch()
    a = torch.randn(4096, device="cuda")
    handle = vector_add.compile(a, a, a.clone())
    assert handle.num_regs > 0 and handle.spills == 0
    assert "ld.global" in handle.ptx


def test_runs_on_torch_current_stream():
    torch = _torch()
    a = torch.randn(1 << 20, device="cuda")
    c = torch.zeros_like(a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())      # a and c are made on the default stream
    with torch.cuda.stream(s):
        vector_add(a, a, c)
        d = c * 1          # ordered after the kernel on stream s
    s.synchronize()
    torch.testing.assert_close(d, a + a, rtol=0, atol=0)


def test_fast_path_follows_signature_and_shape_changes():
    torch = _torch()
    base = torch.randn(8193, device="cuda")
    cases = [base[:4096], base[1:4097], base[:4096], base[:8192], base[1:1001]]
    for a in cases:              # aligned, misaligned, aligned again, other sizes
        b = torch.randn_like(a)
        c = torch.full_like(a, float("nan"))
        vector_add(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    x = torch.randn(64, 96, device="cuda")
    bias = torch.randn(96, device="cuda")
    for view in (x, x[:, :48], x.t().contiguous().t()):
        y = torch.zeros(view.shape, device="cuda")
        scale_bias(view, bias[:view.shape[1]], y, 2.0)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, view * 2.0 + bias[:view.shape[1]])

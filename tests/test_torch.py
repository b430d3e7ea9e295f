"""tilejit.torch.custom_op: a kernel as a torch.library custom operator, checked on the CPU
(the simulator runs it): the schema, torch.library.opcheck (schema, fake tensors,
autograd registration), torch.compile(fullgraph=True) with no graph break and no
recompilation per call nor per input size (dynamic shapes), an operator that mutates its
argument (its version counter bumped), a backward registered with
torch.library.register_autograd, and bad registrations."""
import pytest
import torch

import tilejit
import tilejit.language as T
import tilejit.torch as tjt


@tilejit.kernel
def add_relu(A, B, block: T.constexpr = 256):
    N = A.shape[0]
    C = T.empty((N,), A.dtype)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                C[j] = T.max(A[j] + B[j], 0)
    return C


@tilejit.kernel
def row_sums_and_max(X, block: T.constexpr = 4):
    M, N = X.shape
    S = T.empty((M,), T.float32)
    Mx = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i in T.Parallel(block):
            r = bx * block + i
            if r < M:
                s = T.alloc_var(T.float32)
                m = T.alloc_var(T.float32)
                s = 0.0
                m = -T.infinity(T.float32)
                for j in T.serial(N):
                    s += X[r, j]
                    m = T.max(m, X[r, j])
                S[r] = s
                Mx[r] = m
    return S, Mx


@tilejit.kernel
def scale_(X, alpha: float, block: T.constexpr = 128):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                X[j] = X[j] * alpha


add_relu_op = tjt.custom_op("tjtest::add_relu", add_relu, constexprs={"block": 128})
sums_op = tjt.custom_op("tjtest::row_sums_and_max", row_sums_and_max)
scale_op = tjt.custom_op("tjtest::scale_", scale_)


def test_schema_follows_the_kernel():
    assert str(torch.ops.tjtest.add_relu.default._schema) == \
        "tjtest::add_relu(Tensor A, Tensor B) -> Tensor"
    assert str(torch.ops.tjtest.row_sums_and_max.default._schema) == \
        "tjtest::row_sums_and_max(Tensor X) -> (Tensor, Tensor)"
    assert str(torch.ops.tjtest.scale_.default._schema) == \
        "tjtest::scale_(Tensor(a!) X, float alpha) -> ()"


def test_the_operator_runs_the_kernel():
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(add_relu_op(a, b), torch.relu(a + b))
    torch.testing.assert_close(torch.ops.tjtest.add_relu(a, b), torch.relu(a + b))
    x = torch.randn(37, 19)
    s, m = sums_op(x)
    torch.testing.assert_close(s, x.sum(1))
    torch.testing.assert_close(m, x.amax(1))
    y = torch.randn(300)
    ref = y * 3
    version = y._version
    scale_op(y, 3.0)
    torch.testing.assert_close(y, ref)
    assert y._version > version     # autograd sees the write
    assert isinstance(add_relu_op, torch._ops.OpOverload)


def test_a_backward_registered_with_torch_library_trains():
    op = tjt.custom_op("tjtest::add_relu_trained", add_relu, constexprs={"block": 64})

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        g = grad * (out > 0)
        return g, g

    torch.library.register_autograd("tjtest::add_relu_trained", backward,
                                    setup_context=setup_context)
    a = torch.randn(300, dtype=torch.float64, requires_grad=True)
    b = torch.randn(300, dtype=torch.float64, requires_grad=True)
    op(a, b).square().sum().backward()
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    torch.relu(a2 + b2).square().sum().backward()
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


def test_opcheck():
    torch.library.opcheck(add_relu_op, (torch.randn(300), torch.randn(300)))
    torch.library.opcheck(sums_op, (torch.randn(9, 5),))
    torch.library.opcheck(scale_op, (torch.randn(50), 0.5))


def test_fake_tensors_get_the_outputs_shapes_without_running_the_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(123, 7)
        s, m = sums_op(x)
        c = add_relu_op(torch.empty(55), torch.empty(55))
    assert s.shape == (123,) and m.dtype == torch.float32 and c.shape == (55,)


def test_torch_compile_traces_through_with_no_graph_break_or_recompile():
    def model(a, b, x):
        h = add_relu_op(a * 2, b) + 1
        s, m = sums_op(x)
        return h.sum() + s.sum() - m.sum()

    a, b, x = torch.randn(512), torch.randn(512), torch.randn(16, 8)
    explained = torch._dynamo.explain(model)(a, b, x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    from torch._dynamo.utils import counters
    counters.clear()
    for _ in range(3):
        a, b, x = torch.randn(512), torch.randn(512), torch.randn(16, 8)
        torch.testing.assert_close(compiled(a, b, x), model(a, b, x))
    assert counters["stats"]["unique_graphs"] == 1


def test_dynamic_shapes_compile_once_for_every_size():
    """The fake implementation keeps symbolic sizes symbolic (``T.empty``'s shape, the
    grid not computed): one graph for every size, where specializing on each size
    recompiled per call and failed at the recompile limit under fullgraph=True."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def model(a, b, x):
        h = add_relu_op(a * 2, b) + 1
        s, m = sums_op(x)
        y = h.clone()
        scale_op(y, 0.5)
        return h, s - m, y

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, dynamic=True, fullgraph=True, backend=counter)
    for n, rows, cols in [(100, 3, 5), (257, 17, 4), (512, 8, 8), (1000, 33, 2),
                          (1500, 5, 9)]:
        a, b, x = torch.randn(n), torch.randn(n), torch.randn(rows, cols)
        for got, want in zip(compiled(a, b, x), model(a, b, x)):
            torch.testing.assert_close(got, want)
    assert counter.frame_count == 1


def test_automatic_dynamic_shapes_stop_recompiling_after_the_second_size():
    """torch.compile's default (dynamic=None) compiles the first size static, the second
    with dynamic sizes, and that graph for every size after: ten sizes under
    fullgraph=True stay below the recompile limit (8)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def model(a, b):
        return add_relu_op(a, b) * 3

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, fullgraph=True, backend=counter)
    for n in range(100, 1100, 100):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(a, b), model(a, b))
    assert counter.frame_count == 2


def test_bad_registrations_are_clear_errors():
    with pytest.raises(ValueError, match="namespace::op"):
        tjt.custom_op("add_relu", add_relu)
    with pytest.raises(ValueError, match="blok not among"):
        tjt.custom_op("tjtest::x", add_relu, constexprs={"blok": 1})
    with pytest.raises(TypeError, match="expected a @tilejit.kernel"):
        tjt.custom_op("tjtest::y", lambda a: a)
    with pytest.raises(ValueError, match="registered already"):
        tjt.custom_op("tjtest::add_relu", add_relu)


@tilejit.kernel
def axpy_into(X, Y, Out, Extra=None, alpha: float = 1.0, block: T.constexpr = 128):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                Out[j] = alpha * X[j] + Y[j]


def test_outputs_allocated_by_the_operator_make_it_functional():
    """outputs=: a written argument becomes a result the operator allocates, so the
    operator is functional and takes a backward; a tensor defaulting to None is
    optional."""
    op = tjt.custom_op("tjtest::axpy_into", axpy_into, scalars={"alpha": float},
                       outputs={"Out": lambda X, **_: torch.empty_like(X)})
    assert str(op._schema) == \
        "tjtest::axpy_into(Tensor X, Tensor Y, Tensor? Extra=None, float alpha=1.) -> Tensor"
    x, y = torch.randn(300, dtype=torch.float64), torch.randn(300, dtype=torch.float64)
    torch.testing.assert_close(op(x, y, None, 2.0), 2 * x + y)

    def backward(ctx, grad):
        return grad * ctx.alpha, grad, None, None

    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[3]
    torch.library.register_autograd("tjtest::axpy_into", backward,
                                    setup_context=setup_context)
    x.requires_grad_()
    op(x, y, None, 3.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 3.0))
    torch.library.opcheck(op, (torch.randn(50), torch.randn(50), None, 0.5))


def test_outputs_must_name_tensor_parameters():
    with pytest.raises(ValueError, match="outputs= maps tensor parameters"):
        tjt.custom_op("tjtest::axpy_bad", axpy_into, outputs={"Z": torch.empty_like})

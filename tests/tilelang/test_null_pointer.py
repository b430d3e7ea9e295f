"""None for a tensor the kernel never reads once its compile-time branches are settled,
as TileLang's ``test_tilelang_jit_nullptr`` passes ``Bias=None`` with ``with_bias=False``
(frontend/analysis.unread_params; tilelang/classic.py)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def add_bias(M, N, with_bias=False):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
             Bias: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            for i, j in T.Parallel(32, N):
                if with_bias:
                    C[bx * 32 + i, j] = A[bx * 32 + i, j] + Bias[j]
                else:
                    C[bx * 32 + i, j] = A[bx * 32 + i, j] * 2
    return main


def test_none_for_a_tensor_the_kernel_does_not_read():
    a = torch.randn(64, 16)
    c = torch.zeros(64, 16)
    add_bias(64, 16, with_bias=False)(a, c, None)
    torch.testing.assert_close(c, 2 * a)


def test_none_for_a_tensor_the_kernel_reads_is_refused():
    with pytest.raises(TypeError, match="argument 'Bias': expected a tensor, got NoneType"):
        add_bias(64, 16, with_bias=True)(torch.randn(64, 16), torch.zeros(64, 16), None)


def test_with_the_tensor():
    a, bias = torch.randn(64, 16), torch.randn(16)
    c = torch.zeros(64, 16)
    add_bias(64, 16, with_bias=True)(a, c, bias)
    torch.testing.assert_close(c, a + bias)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    a = torch.randn(96, 16)
    c = torch.zeros(96, 16, device="cuda")
    add_bias(96, 16, with_bias=False)(a.cuda(), c, None)
    sim = torch.zeros(96, 16)
    add_bias(96, 16, with_bias=False)(a, sim, None)
    torch.testing.assert_close(c.cpu().double(), 2 * a.double())
    torch.testing.assert_close(c.cpu(), sim)


def test_compile_and_par_compile_of_a_factory():
    # TileLang's kernel.compile() and kernel.par_compile(configs)
    k = add_bias.compile(64, 16, with_bias=False)
    assert k is add_bias(64, 16, with_bias=False)
    kernels = add_bias.par_compile([(64, 16), {"M": 32, "N": 8, "with_bias": False}])
    for (m, n), kernel in zip([(64, 16), (32, 8)], kernels):
        a, c = torch.randn(m, n), torch.zeros(m, n)
        kernel(a, c, None)
        torch.testing.assert_close(c, 2 * a)
    assert add_bias.par_compile([("bad",)], ignore_error=True) == [None]


@tilelang.jit
def shape_of_the_nullable(with_bias=False):
    """TileLang's nullable-buffer test: tensors sharing a symbolic extent, any of them None;
    the kernel reads only the symbol (bound from a tensor given, else 0)."""
    m = T.dynamic("m")

    @T.prim_func
    def main(a: T.Tensor[(m,), T.int32], b: T.Tensor[(m,), T.int32],
             out: T.Tensor[(2,), T.int32]):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                out[0] = m
                out[1] = b[0] if with_bias else 7
    return main


@pytest.mark.parametrize("given", ["a", "b", "both", "none"])
def test_a_symbol_of_tensors_passed_as_none(given):
    x = torch.arange(5, dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    a = x if given in ("a", "both") else None
    b = x if given in ("b", "both") else None
    shape_of_the_nullable()(a, b, out)
    assert out.tolist() == [0 if given == "none" else 5, 7]


def test_none_for_a_tensor_read_where_its_shape_is_too_is_refused():
    with pytest.raises(TypeError, match="argument 'b': expected a tensor, got NoneType"):
        shape_of_the_nullable(with_bias=True)(torch.zeros(5, dtype=torch.int32), None,
                                              torch.zeros(2, dtype=torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("given", ["a", "b", "none"])
def test_gpu_a_symbol_of_tensors_passed_as_none(given):
    x = torch.arange(5, dtype=torch.int32, device="cuda")
    out = torch.zeros(2, dtype=torch.int32, device="cuda")
    shape_of_the_nullable()(x if given == "a" else None, x if given == "b" else None, out)
    assert out.cpu().tolist() == [0 if given == "none" else 5, 7]


@tilelang.jit
def gather_rows(M, N, has_indices=False):
    """lmdeploy's form: the optional tensor read on the side of a T.if_then_else (or a
    conditional expression) that a compile-time flag settles."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
             Indices: T.Tensor((M,), "int32") = None):
        with T.Kernel(M, threads=32) as bx:
            row = T.if_then_else(has_indices, Indices[bx], bx)
            scale = 2.0 if not has_indices else T.cast(Indices[0], "float32")
            for j in T.Parallel(N):
                C[bx, j] = A[row, j] * scale
    return main


def test_none_for_a_tensor_read_on_a_settled_side(ptxas):
    a = torch.randn(8, 32)
    c = torch.zeros(8, 32)
    gather_rows(8, 32)(a, c, None)
    torch.testing.assert_close(c, 2 * a)
    ptxas(gather_rows(8, 32).get_kernel_source(), "sm_90a")
    with pytest.raises(TypeError, match="argument 'Indices': expected a tensor, got NoneType"):
        gather_rows(8, 32, has_indices=True)(a, c, None)
    idx = torch.tensor([3, 1, 2, 0, 7, 6, 5, 4], dtype=torch.int32)
    gather_rows(8, 32, has_indices=True)(a, c, idx)
    torch.testing.assert_close(c, a[idx.long()] * 3)


@pytest.mark.gpu
def test_none_for_a_tensor_read_on_a_settled_side_on_the_gpu():
    a = torch.randn(8, 32)
    c = torch.zeros(8, 32, device="cuda")
    gather_rows(8, 32)(a.cuda(), c, None)
    torch.testing.assert_close(c.cpu().double(), 2 * a.double())


# -- a branch settled by an attribute of an object of the user's (DeepSeek TileKernels'
# per-channel cast reads `x_sf_invs` only `if in_config.with_sf:` on a frozen dataclass)
class _Format:
    def __init__(self, with_bias, nested=None):
        self.with_bias = with_bias
        self.inner = nested


@tilelang.jit
def add_bias_by_format(M, N, fmt):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
             Bias: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            for i, j in T.Parallel(32, N):
                if fmt.with_bias and not fmt.inner.with_bias:
                    C[bx * 32 + i, j] = A[bx * 32 + i, j] + Bias[j]
                else:
                    C[bx * 32 + i, j] = A[bx * 32 + i, j] * 2
    return main


def test_none_for_a_tensor_an_objects_attribute_leaves_unread(ptxas):
    a, c = torch.randn(64, 16), torch.zeros(64, 16)
    add_bias_by_format(64, 16, _Format(False, _Format(False)))(a, c, None)
    torch.testing.assert_close(c, 2 * a)
    add_bias_by_format(64, 16, _Format(True, _Format(True)))(a, c, None)
    torch.testing.assert_close(c, 2 * a)
    with pytest.raises(TypeError, match="argument 'Bias': expected a tensor, got NoneType"):
        add_bias_by_format(64, 16, _Format(True, _Format(False)))(a, c, None)
    bias = torch.randn(16)
    add_bias_by_format(64, 16, _Format(True, _Format(False)))(a, c, bias)
    torch.testing.assert_close(c, a + bias)
    ptx = add_bias_by_format(64, 16, _Format(False, _Format(False))).get_kernel_source()
    assert "ld.global" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_none_for_a_tensor_an_objects_attribute_leaves_unread_on_the_gpu():
    a = torch.randn(64, 16)
    c = torch.zeros(64, 16, device="cuda")
    add_bias_by_format(64, 16, _Format(False, _Format(False)))(a.cuda(), c, None)
    torch.testing.assert_close(c.cpu().double(), 2 * a.double())

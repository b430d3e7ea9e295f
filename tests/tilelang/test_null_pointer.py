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

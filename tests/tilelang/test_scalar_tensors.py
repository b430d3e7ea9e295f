"""0-d tensors: TileLang's ``T.Tensor((), dtype)`` read and written as ``s[()]``
(frontend/scalar_tensors.py; runtime/host.scalar_views passes the caller's 0-d tensor as
its one-element view)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def scaled(N, block=64, dtype="float32"):
    @T.prim_func
    def main(x: T.Tensor((N,), dtype), s: T.Tensor((), dtype), y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    y[bx * block + i] = x[bx * block + i] * s[()]
    return main


@tilelang.jit(out_idx=[1])
def total(N, dtype="float32"):
    @T.prim_func
    def main(x: T.Tensor((N,), dtype), out: T.Tensor((), dtype)):
        with T.Kernel(1, threads=64):
            acc = T.alloc_fragment((N,), dtype)
            s = T.alloc_fragment((1,), dtype)
            T.copy(x, acc)
            T.reduce_sum(acc, s, dim=0)
            out[()] = s[0]
    return main


@tilejit.kernel
def count_above(X, limit, count):
    """The eager style: a 0-d limit read, a 0-d count written by one thread."""
    N = X.shape[0]
    with T.Kernel(1, threads=32):
        n = T.alloc_var("int32", init=0)
        for i in T.serial(N):
            if X[i] > limit[()]:
                n += 1
        count[()] = n


def test_a_zero_d_input_read_in_every_thread():
    x, s = torch.randn(100), torch.tensor(-2.5)
    y = torch.empty(100)
    scaled(100)(x, s, y)
    torch.testing.assert_close(y, x * -2.5)


def test_a_zero_d_output_allocated_and_returned():
    x = torch.randn(64)
    out = total(64)(x)
    assert out.shape == torch.Size([])
    torch.testing.assert_close(out.double(), x.double().sum(), rtol=1e-5, atol=1e-5)


def test_the_eager_style_writes_the_callers_zero_d_tensors():
    x = np.linspace(-1, 1, 41, dtype=np.float32)
    limit, count = np.array(0.5, np.float32), np.array(-1, np.int32)
    count_above(x, limit, count)
    assert count.shape == () and int(count) == int((x > 0.5).sum())


def test_a_tensor_of_another_rank_is_refused_naming_the_use():
    with pytest.raises(ValueError, match=r"argument 'limit': expected a 0-d tensor \(the "
                       r"kernel reads it as limit\[\(\)\] at line \d+\), got a 1-d tensor"):
        count_above(np.ones(4, np.float32), np.array([0.5], np.float32),
                    np.zeros((), np.int32))


def test_a_zero_d_tensor_the_kernel_indexes_is_refused():
    @tilejit.kernel
    def first(X, Y):
        with T.Kernel(1, threads=32):
            Y[0] = X[0]
    with pytest.raises(ValueError, match=r"argument 'X': expected a 1-d tensor .* got a 0-d "
                       r"tensor of shape \(\) \(a kernel reads a 0-d tensor as X\[\(\)\]\)"):
        first(np.array(1.0, np.float32), np.zeros(1, np.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = total(64).get_kernel_source(arch=arch)
    assert "st.global" in ptx
    ptxas(ptx, arch)
    ptx = scaled(100).get_kernel_source(arch=arch)
    assert "ld.global" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x, s = torch.randn(1000), torch.tensor(0.75)
    y = torch.empty(1000, device="cuda")
    scaled(1000)(x.cuda(), s.cuda(), y)
    sim = torch.empty(1000)
    scaled(1000)(x, s, sim)
    torch.testing.assert_close(y.cpu().double(), x.double() * 0.75)
    torch.testing.assert_close(y.cpu(), sim)
    out = total(64)(x[:64].cuda())
    assert out.shape == torch.Size([]) and out.is_cuda
    torch.testing.assert_close(out.cpu().double(), x[:64].double().sum(), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(out.cpu(), total(64)(x[:64]))
    limit, count = torch.tensor(0.5, device="cuda"), torch.tensor(-1, dtype=torch.int32,
                                                                 device="cuda")
    count_above(x.cuda(), limit, count)
    assert int(count) == int((x > 0.5).sum())

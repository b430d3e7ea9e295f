"""T.copy between two whole global tensors (a parameter or a view of one), as TileLang
programs write ``T.copy(A_reshaped, B)``: an element loop over the tensors' compile-time
shapes (passes/global_copies.py)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def reshaped_copy(N, M, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N // M, M), dtype)):
        with T.Kernel(1) as _:
            A_reshaped = T.reshape(A, [N // M, M])
            T.copy(A_reshaped, B)
    return main


@tilejit.kernel
def whole_copy(A, B):
    with T.Kernel(1, threads=128):
        T.copy(A, B)


def test_a_reshaped_tensor_copied_whole():
    kernel = tilelang.compile(reshaped_copy(1024, 32, T.float32), out_idx=-1)
    a = torch.randn(1024)
    torch.testing.assert_close(kernel(a), a.reshape(32, 32))


def test_whole_tensors_with_unit_dimensions():
    a = np.random.rand(1, 96, 4).astype(np.float32)
    b = np.zeros((96, 1, 4), np.float32)
    whole_copy(a, b)
    np.testing.assert_array_equal(b[:, 0, :], a[0])


def converting_copy(sliced):
    @T.prim_func
    def main(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "int32")):
        with T.Kernel(1, threads=128):
            if sliced:
                T.copy(A[0:32, 0:64], B[0:32, 0:64])
            else:
                T.copy(A, B)
    return main


@pytest.mark.parametrize("sliced", [False, True])
def test_a_copy_between_dtypes_converts_float_to_int_too(sliced, ptxas):
    """As a tile copy converts (docs/errors.md): toward zero into an int32 tensor."""
    a = torch.randn(32, 64) * 10
    kernel = tilelang.compile(converting_copy(sliced), out_idx=[1])
    assert torch.equal(kernel(a), a.to(torch.int32))
    ptxas(tilelang.compile(converting_copy(sliced), out_idx=[1],
                           target="cuda").get_kernel_source(arch="sm_80"), "sm_80")


def test_shapes_that_differ_are_a_compile_error():
    with pytest.raises(CompileError, match=r"shapes \(8, 4\) and \(4, 8\) differ"):
        whole_copy.compile(np.zeros((8, 4), np.float32), np.zeros((4, 8), np.float32),
                           target="cuda", arch="sm_90a")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(reshaped_copy(2048, 64, T.float16), out_idx=-1)
          .get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    kernel = tilelang.compile(reshaped_copy(2048, 64, T.float16), out_idx=-1)
    a = torch.randn(2048, dtype=torch.float16)
    got = kernel(a.cuda())
    assert torch.equal(got.cpu(), a.reshape(32, 64))
    sim = tilelang.compile(reshaped_copy(2048, 64, T.float16), out_idx=-1, target="sim")
    assert torch.equal(sim(a), got.cpu())


@pytest.mark.gpu
@pytest.mark.parametrize("sliced", [False, True])
def test_a_copy_between_dtypes_on_gpu(sliced):
    a = torch.randn(32, 64) * 10
    kernel = tilelang.compile(converting_copy(sliced), out_idx=[1])
    gpu = kernel(a.cuda()).cpu()
    assert torch.equal(gpu, a.to(torch.int32)) and torch.equal(gpu, kernel(a))

"""``f.get_kernel_source(M=..., N=...)`` of a ``@tilelang.jit`` program whose output is
``T.empty(..., T.bfloat16)``, as TileLang's DeepGEMM example asks for its source before
any tensor exists: compiling from shapes allocates nothing (runtime/host.allocate_output
gives a TensorSpec), so numpy's missing bfloat16 does not matter."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def to_bf16(A, block=64):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.bfloat16)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, N):
            C[bx * block + i, j] = A[bx * block + i, j] * 2
    return C


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_source_from_shapes_alone(arch, ptxas):
    ptx = to_bf16.compile(M=128, N=32, arch=arch).get_kernel_source()
    assert ".entry" in ptx
    ptxas(ptx, arch)


def test_the_program_still_runs_on_tensors():
    a = torch.randn(128, 32)
    torch.testing.assert_close(to_bf16(a), (2 * a).bfloat16())

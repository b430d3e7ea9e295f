"""TileLang's programmatic dependent launch, ``T.pdl_trigger()`` / ``T.pdl_sync()``:
``griddepcontrol.launch_dependents`` / ``griddepcontrol.wait`` on sm_90+, nothing on
sm_80 and in the simulator. tilejit launches without the early-launch attribute, so a
kernel written with them computes what it computes without them; written as TileLang's
test writes them: two kernels of one ``T.prim_func``."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.jit
def two_kernels_with_pdl(N, block_size=256, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_size), threads=block_size) as (bx,):
            for i in T.Parallel(block_size):
                idx = bx * block_size + i
                if idx < N:
                    B[idx] = A[idx] + 1.0
            T.pdl_trigger()
        with T.Kernel(T.ceildiv(N, block_size), threads=block_size) as (bx2,):
            T.pdl_sync()
            for i in T.Parallel(block_size):
                idx = bx2 * block_size + i
                if idx < N:
                    C[idx] = B[idx] * 2.0
    return main


@tilejit.kernel
def one_kernel(A, B, block: T.constexpr = 128):
    with T.Kernel(T.ceildiv(A.shape[0], block), threads=block) as bx:
        T.pdl_sync()
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] * 3.0
        T.pdl_trigger()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_two_kernels_compute_as_without(device):
    a = torch.randn(300, device=device)
    b, c = torch.empty_like(a), torch.empty_like(a)
    two_kernels_with_pdl(300)(a, b, c)
    torch.testing.assert_close(c.cpu(), (a.cpu() + 1) * 2)


@pytest.mark.parametrize("arch, present", [("sm_80", False), ("sm_90a", True)])
def test_griddepcontrol_on_sm90_only(arch, present, ptxas):
    a = np.zeros(256, np.float32)
    ptx = one_kernel.compile(a, a.copy(), target="cuda", arch=arch).ptx
    assert ("griddepcontrol.wait;" in ptx) == present
    assert ("griddepcontrol.launch_dependents;" in ptx) == present
    ptxas(ptx, arch)


def test_they_take_no_arguments():
    @tilejit.kernel
    def wrong(A):
        with T.Kernel(1, threads=32) as bx:
            T.pdl_sync(1)
            A[bx] = 0.0

    with pytest.raises(tilejit.CompileError, match=r"T.pdl_sync\(\) take no arguments"):
        assert wrong.compile(np.zeros(1, np.float32), target="cuda", arch="sm_90a").ptx

"""T.gemm on dtypes no tensor-core instruction takes here (float64): TileLang's SIMT
gemm, each thread's elements of C as a loop of fused multiply-adds over K from shared
memory (codegen/lowering/fma_gemm.py). In simulation against numpy (float64, every
transpose, sizes that are not multiples of the block, pipelined); PTX with fma.rn.f64
assembled by ptxas for sm_80 and sm_90a; the same lowering compiled for AMDGPU and run on
the CPU (tests/support/amdgpu_cpu.py); with ``-m gpu`` on the device against numpy and
the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from amdgpu_cpu import run_kernel
from kernels import gemm


def mm64(A, B, C, ta=False, tb=False, **kw):
    """The shared test GEMM (tests/support/kernels.py) on float64, 64x64x16 blocks."""
    return gemm(A, B, C, block_M=64, block_N=64, block_K=16, trans_A=ta, trans_B=tb,
                acc="float64", **kw)


def _case(ta, tb, M=100, N=90, K=70, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if ta else (M, K))
    b = rng.standard_normal((N, K) if tb else (K, N))
    return a, b, (a.T if ta else a) @ (b.T if tb else b)


TRANSPOSES = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_in_simulation(ta, tb):
    a, b, ref = _case(ta, tb)
    c = np.zeros(ref.shape)
    mm64(a, b, c, ta=ta, tb=tb)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a, b, ref = _case(False, False)
    ptx = gemm.compile(a, b, np.zeros(ref.shape), block_M=64, block_N=64, block_K=16,
                       acc="float64", target="cuda", arch=arch).ptx
    assert "fma.rn.f64" in ptx and "mma.sync" not in ptx and "wgmma" not in ptx
    ptxas(ptx, arch)


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_the_lowering_run_on_the_cpu(ta, tb):
    """The rule is target-independent: compiled for AMDGPU, its IR run on the CPU."""
    a, b, ref = _case(ta, tb, M=70, N=72, K=40, seed=1)
    c = np.zeros(ref.shape)
    handle = gemm.compile(a, b, c, block_M=64, block_N=64, block_K=16, trans_A=ta,
                          trans_B=tb, acc="float64", panel=0, target="amdgpu",
                          arch="gfx942")
    run_kernel(handle, [a, b, c], (2, 2), 128)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-12)


def test_an_unsupported_dtype_still_names_the_supported_ones():
    @tilejit.kernel
    def mm8(A, B, C):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), A.dtype)
            B_s = T.alloc_shared((32, 64), B.dtype)
            C_f = T.alloc_fragment((64, 64), T.float64)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])
    a = np.zeros((64, 32), np.float32)
    with pytest.raises(tilejit.CompileError, match="float32/float32/float64; supported: .*"
                                                   "float64/float64/float64"):
        mm8.compile(a, np.zeros((32, 64), np.float32), np.zeros((64, 64)), target="cuda",
                    arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_on_the_gpu(ta, tb):
    a, b, ref = _case(ta, tb, M=300, N=200, K=130, seed=2)
    c = torch.zeros(ref.shape, dtype=torch.float64, device="cuda")
    mm64(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c, ta=ta, tb=tb)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=0, atol=1e-11)

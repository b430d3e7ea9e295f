"""T.gemm on dtypes no tensor-core instruction takes here (float64): TileLang's SIMT
gemm, each thread's elements of C as a loop of fused multiply-adds over K from shared
memory (codegen/lowering/fma_gemm.py). In simulation against numpy (float64, every
transpose, sizes that are not multiples of the block, pipelined); PTX with fma.rn.f64
assembled by ptxas for sm_80 and sm_90a; the same lowering compiled for AMDGPU and run on
the CPU (tests/support/amdgpu_cpu.py); with ``-m gpu`` on the device against numpy and
the simulator. On sm_75 (no mma.sync.m16n8k16) every float gemm into a float32 or float64
accumulator takes this path, as TileLang's Turing fallback does: compiled for sm_75 and
run on the device (whose driver compiles sm_75 PTX for it)."""
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


# -- sm_75: the CUDA cores for every float gemm ----------------------------------------
SM75_CASES = [("float32", "float32"), ("float64", "float64"), ("bfloat16", "float32"),
              ("float16", "float32")]
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "float64": torch.float64}


def ss_gemm(M, N, K, in_dtype, accum_dtype, threads=128):
    """The way TileLang's Turing tests write it: one block, whole tiles."""
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype),
             C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(1, threads=threads):
            A_shared = T.alloc_shared((M, K), in_dtype)
            B_shared = T.alloc_shared((K, N), in_dtype)
            C_local = T.alloc_fragment((M, N), accum_dtype)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            T.gemm(A_shared, B_shared, C_local, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_local, C)
    return main


@pytest.mark.parametrize("in_dtype,accum_dtype", SM75_CASES)
def test_sm75_float_gemms_compile_to_fma(in_dtype, accum_dtype, ptxas):
    kernel = tilejit.compile(ss_gemm(64, 64, 32, in_dtype, accum_dtype),
                             target={"kind": "cuda", "arch": "sm_75"}, out_idx=[2])
    ptx = kernel.get_kernel_source()
    assert ".target sm_75" in ptx and "mma" not in ptx
    assert f"fma.rn.f{64 if accum_dtype == 'float64' else 32}" in ptx
    ptxas(ptx, "sm_75")


@pytest.mark.parametrize("in_dtype,accum_dtype", [("float16", "float16"), ("int8", "int32")])
def test_sm75_gemms_the_cuda_cores_cannot_take_are_refused(in_dtype, accum_dtype):
    with pytest.raises(tilejit.CompileError, match=rf"T.gemm on sm_75 runs on the CUDA cores.*"
                                                   rf"{in_dtype}/{in_dtype}/{accum_dtype} "
                                                   rf"need sm_80"):
        tilejit.compile(ss_gemm(64, 64, 32, in_dtype, accum_dtype),
                        target="cuda -arch=sm_75", out_idx=[2]).get_kernel_source()


@pytest.mark.gpu
@pytest.mark.parametrize("in_dtype,accum_dtype", SM75_CASES)
def test_sm75_fma_gemm_on_the_device(in_dtype, accum_dtype):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(64, 32, generator=g).to(TORCH[in_dtype])
    b = torch.randn(32, 64, generator=g).to(TORCH[in_dtype])
    ref = a.double() @ b.double()
    kernel = tilejit.compile(ss_gemm(64, 64, 32, in_dtype, accum_dtype),
                             target="cuda -arch=sm_75", out_idx=[2])
    c = kernel(a.cuda(), b.cuda())
    torch.cuda.synchronize()
    tol = 1e-12 if accum_dtype == "float64" else 1e-4
    torch.testing.assert_close(c.cpu().double(), ref, rtol=tol, atol=tol)
    sim = tilejit.compile(ss_gemm(64, 64, 32, in_dtype, accum_dtype), target="sim",
                          out_idx=[2])(a, b)
    # the simulator multiplies float32 as the tensor cores do (tf32); the CUDA cores do not
    tol = 1e-2 if in_dtype == "float32" else tol
    torch.testing.assert_close(c.cpu().double(), sim.double(), rtol=tol, atol=tol)

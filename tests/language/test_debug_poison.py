"""debug=True kernels start every shared tile and every fragment slot as all-ones bits
(NaN in float types, -1 in integers): an element read before it is written gives NaN on
the GPU, as the simulator reports it (UninitializedReadError). The PTX carries the fill
(shared memory by all threads, then a barrier, before the body) and assembles with ptxas,
a warp-specialized GEMM included; without debug the PTX has none of it."""
import re

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from kernels import gemm
from tilejit.sim.runtime import UninitializedReadError


@tilejit.kernel
def accumulate_without_clear(A, B, bm: T.constexpr = 64):
    """The seed's mistake: a fragment accumulated into before it is cleared."""
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, bm), threads=128) as bx:
        S = T.alloc_shared((bm,), A.dtype)
        F = T.alloc_fragment((bm,), T.float32)
        T.copy(A[bx * bm], S)
        for i in T.Parallel(bm):
            F[i] = F[i] + S[i]
        T.copy(F, B[bx * bm])


def _ptx(kernel, *args, debug, arch="sm_90a", **kw):
    return tilejit.kernel(kernel.func, debug=debug).compile(*args, target="cuda", arch=arch,
                                                             **kw).ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_fill_is_in_debug_kernels_only(arch, ptxas):
    a = np.zeros(256, np.float32)
    plain = _ptx(accumulate_without_clear, a, a.copy(), debug=False, arch=arch)
    debug = _ptx(accumulate_without_clear, a, a.copy(), debug=True, arch=arch)
    assert not re.search(r"st\.shared\.b32\s+\[[^\]]+\],\s*-1;", plain)
    fill = re.search(r"st\.shared\.b32\s+\[[^\]]+\],\s*-1;", debug)
    assert fill and "bar.sync" in debug[fill.end():]       # a barrier after the fill
    assert "0fFFFFFFFF" in debug and "0fFFFFFFFF" not in plain   # the fragment's NaN
    ptxas(debug, arch)


def test_a_warp_specialized_gemm_in_debug_mode_assembles(ptxas):
    a = np.zeros((512, 512), np.float16)
    c = np.zeros((512, 512), np.float32)
    ptx = tilejit.kernel(gemm.func, debug=True).compile(
        a, a.copy(), c, target="cuda", arch="sm_90a", block_M=128, block_N=256, block_K=64,
        threads=256, stages=3).ptx
    assert "setmaxnreg" in ptx and re.search(r"st\.shared\.b32\s+\[[^\]]+\],\s*-1;", ptx)
    ptxas(ptx, "sm_90a")


def test_the_simulator_reports_the_read():
    a = np.ones(256, np.float32)
    with pytest.raises(UninitializedReadError, match="F"):
        tilejit.kernel(accumulate_without_clear.func, target="sim")(a, np.zeros_like(a))


@pytest.mark.gpu
def test_the_gpu_gives_nan_in_debug_mode():
    a = torch.ones(256, device="cuda")
    b = torch.zeros(256, device="cuda")
    tilejit.kernel(accumulate_without_clear.func, debug=True)(a, b)
    torch.cuda.synchronize()
    assert torch.isnan(b).all()


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_amdgpu_debug_kernels_fill_lds_then_barrier(arch):
    """The same fill on AMDGPU: every work-item writes -1 words of LDS (ds_write), then
    s_barrier, before the body; without debug the assembly has none of it."""
    a = np.zeros(256, np.float32)

    def asm(debug):
        return tilejit.kernel(accumulate_without_clear.func, debug=debug).compile(
            a, a.copy(), target="amdgpu", arch=arch).asm
    plain, debug = asm(False), asm(True)
    fill = re.search(r"v_mov_b32_e32 (v\d+), -1\n\s*ds_write_b32 v\d+, \1\n", debug)
    assert fill and "s_barrier" in debug[fill.end():]
    assert not re.search(r"ds_write_b32", plain)
    assert debug.count("s_barrier") == plain.count("s_barrier") + 1

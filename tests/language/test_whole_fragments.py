"""Small fragments every thread holds whole, as TileLang's block-sparse attention uses
its block mask: copied whole from global memory (`T.copy(Mask[bx, 0], mask)`) and read at
an index every thread computes alike (`mask[k]` in a serial loop); in simulation against
numpy, PTX assembled by ptxas, on the GPU against torch and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def masked_block_sums(X, Mask, Out, bn: T.constexpr = 32, nb: T.constexpr = 4):
    """Out[r] = the sum of the bn-wide blocks k of row r whose mask[r, k] is set."""
    M, N = X.shape
    with T.Kernel(M, threads=128) as bx:
        mask = T.alloc_fragment((nb,), T.int8)
        acc = T.alloc_fragment((bn,), T.float32)
        T.clear(acc)
        T.copy(Mask[bx, 0], mask)
        for k in T.serial(nb):
            if mask[k] != 0:
                for j in T.Parallel(bn):
                    acc[j] += X[bx, k * bn + j]
        T.copy(acc, Out[bx, 0])


@tilejit.kernel
def indexed_by_the_parallel_loop(X, Out):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((4,), T.float32)
        T.copy(X[0], f)
        for j in T.Parallel(4):
            Out[j] = f[(j + 1) % 4]


def _inputs(m=8, nb=4, bn=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, nb * bn)).astype(np.float32)
    mask = (rng.random((m, nb)) > 0.5).astype(np.int8)
    ref = (x.astype(np.float64).reshape(m, nb, bn) * mask[:, :, None]).sum(1)
    return x, mask, ref


def test_a_mask_copied_whole_and_read_in_a_serial_loop():
    x, mask, ref = _inputs()
    out = np.zeros((8, 32), np.float32)
    masked_block_sums(x, mask, out)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    x, mask, _ = _inputs()
    ptxas(masked_block_sums.compile(x, mask, np.zeros((8, 32), np.float32), target="cuda",
                                    arch=arch).ptx, arch)


def test_an_index_with_the_parallel_loops_variable_is_still_an_error():
    x = np.zeros(4, np.float32)
    with pytest.raises(CompileError, match="fragment 'f' must be indexed with the T.Parallel "
                                           "loop's indices"):
        indexed_by_the_parallel_loop.compile(x, x.copy(), target="cuda", arch="sm_90a")


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    x, mask, ref = _inputs(m=300, seed=1)
    out = torch.zeros(300, 32, device="cuda")
    masked_block_sums(torch.from_numpy(x).cuda(), torch.from_numpy(mask).cuda(), out)
    sim = np.zeros((300, 32), np.float32)
    masked_block_sums(x, mask, sim)
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out.cpu().numpy(), sim)

"""Small fragments every thread holds whole, as TileLang's block-sparse attention uses
its block mask: copied whole from global memory (`T.copy(Mask[bx, 0], mask)`) and read at
an index every thread computes alike (`mask[k]` in a serial loop); in simulation against
numpy, PTX assembled by ptxas, on the GPU against torch and the simulator."""
import numpy as np
import torch
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


# -- a reduction of a fragment held whole (TileLang's issue 1719, its sixth kernel) ----------
@tilejit.kernel
def whole_reductions(X, Out, n: T.constexpr = 8):
    """Each block writes its row's element by element outside any T.Parallel (so every
    thread holds the fragment whole) and reduces it: sum, max, min and absmax in Out[b]."""
    with T.Kernel(X.shape[0], threads=64) as bx:
        f = T.alloc_fragment((n,), T.float32)
        s = T.alloc_fragment((1,), T.float32)
        m = T.alloc_fragment((1,), T.float32)
        lo = T.alloc_fragment((1,), T.float32)
        am = T.alloc_fragment((1,), T.float32)
        for k in T.serial(n):
            f[k] = X[bx, k] * 2
        f[0] = f[0] - 1
        T.reduce_sum(f, s)
        T.reduce_max(f, m)
        T.reduce_min(f, lo)
        T.reduce_absmax(f, am)
        Out[bx, 0] = s[0]
        Out[bx, 1] = m[0]
        Out[bx, 2] = lo[0]
        Out[bx, 3] = am[0]


def _whole_reference(x):
    f = x.astype(np.float64) * 2
    f[:, 0] -= 1
    return np.stack([f.sum(1), f.max(1), f.min(1), np.abs(f).max(1)], 1)


def test_a_reduction_of_a_fragment_every_thread_holds_whole():
    x = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    out = np.zeros((5, 4), np.float32)
    whole_reductions(x, out)
    np.testing.assert_allclose(out, _whole_reference(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_whole_fragments_reduction_needs_no_shuffle(arch, ptxas):
    """Every thread holds all of f: the reduction is each thread's own, with no shuffle
    and no shared-memory exchange."""
    x = np.zeros((5, 8), np.float32)
    ptx = whole_reductions.compile(x, np.zeros((5, 4), np.float32), target="cuda",
                                   arch=arch).ptx
    assert "shfl" not in ptx and "bar.sync" not in ptx
    ptxas(ptx, arch)


def test_tilelangs_issue_1719_sixth_kernel_compiles():
    @tilejit.jit
    def kernel():
        with T.Kernel():
            tmp1 = T.alloc_fragment((1,), dtype=T.float32)
            tmp2 = T.alloc_fragment((1,), dtype=T.float32)
            tmp1[0] = 1
            T.reduce_sum(tmp1, tmp2)
            tmp2[0]

    assert ".entry" in kernel.compile().get_kernel_source()


@pytest.mark.gpu
def test_whole_fragment_reductions_on_the_gpu_against_the_simulator():
    import torch
    x = np.random.default_rng(4).standard_normal((300, 8)).astype(np.float32)
    out = torch.zeros(300, 4, device="cuda")
    whole_reductions(torch.from_numpy(x).cuda(), out)
    sim = np.zeros((300, 4), np.float32)
    whole_reductions(x, sim)
    np.testing.assert_allclose(out.cpu().numpy(), _whole_reference(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out.cpu().numpy(), sim)


# -- a row reduced through shared memory, its value read at a constant index --------------
def row_sum_then_centre(N):
    """A row of N elements reduced into a (1,) fragment read as ``s[0]``, outside a loop
    and inside one: a row whose threads are not a power-of-two group (N = 100 on 128
    threads) is reduced through shared memory, and every thread is then given the sum."""
    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), S: T.Tensor((4,), "float32"),
             Y: T.Tensor((4, N), "float32")):
        with T.Kernel(4, threads=128) as bx:
            x = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, :], x)
            T.reduce_sum(x, s, dim=0)
            S[bx] = s[0]
            for j in T.Parallel(N):
                x[j] = x[j] - s[0] / N
            T.copy(x, Y[bx, :])
    return main


@pytest.mark.parametrize("N", [100, 128, 150])
def test_a_reduced_rows_value_is_read_at_a_constant_index(N, ptxas):
    x = torch.randn(4, N)
    s, y = tilejit.compile(row_sum_then_centre(N), out_idx=[1, 2])(x)
    torch.testing.assert_close(s.double(), x.double().sum(1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(y.double(), x.double() - x.double().mean(1, keepdim=True),
                               atol=1e-5, rtol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(row_sum_then_centre(N), out_idx=[1, 2],
                              target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("N", [100, 150])
def test_a_reduced_rows_value_is_read_at_a_constant_index_on_the_gpu(N):
    x = torch.randn(4, N)
    s, y = tilejit.compile(row_sum_then_centre(N), out_idx=[1, 2])(x.cuda())
    sim_s, sim_y = tilejit.compile(row_sum_then_centre(N), out_idx=[1, 2])(x)
    torch.testing.assert_close(s.cpu().double(), x.double().sum(1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(s.cpu(), sim_s, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(y.cpu(), sim_y, atol=1e-5, rtol=1e-5)

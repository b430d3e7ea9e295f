"""``T.Pipelined(start, stop, num_stages=...)``, TileLang's signature: the same loop as
``range(start, stop)``, software-pipelined. Before, the compiler read the stop as
``num_stages`` and, with ``num_stages=`` also given, compiled a loop of ``start``
iterations: FlashAttention's backward over the query blocks from the diagonal compiled
to an empty loop without a word."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def tail_sums(A, Out, block_M: T.constexpr = 32, block_N: T.constexpr = 32,
              stages: T.constexpr = 2):
    """Out[r] = the sum of row r of A from column block (r // block_M) to the end."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        A_s = T.alloc_shared([block_M, block_N], A.dtype)
        acc = T.alloc_fragment([block_M, block_N], T.float32)
        row = T.alloc_fragment([block_M], T.float32)
        T.clear(acc)
        for k in T.Pipelined(bx, T.ceildiv(N, block_N), num_stages=stages):
            T.copy(A[bx * block_M:(bx + 1) * block_M, k * block_N:(k + 1) * block_N], A_s)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] += A_s[i, j]
        T.reduce_sum(acc, row, dim=1)
        T.copy(row, Out[bx * block_M:(bx + 1) * block_M])


@tilejit.kernel
def positional_stages(A, Out, block: T.constexpr = 32):
    """T.Pipelined(1, n, 2): a constant start, num_stages as the third positional."""
    M, N = A.shape
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared([M, block], A.dtype)
        acc = T.alloc_fragment([M, block], T.float32)
        row = T.alloc_fragment([M], T.float32)
        T.clear(acc)
        for k in T.Pipelined(1, T.ceildiv(N, block), 2):
            T.copy(A[0:M, k * block:(k + 1) * block], A_s)
            for i, j in T.Parallel(M, block):
                acc[i, j] += A_s[i, j]
        T.reduce_sum(acc, row, dim=1)
        T.copy(row, Out[0:M])


tail_sums_sim = tilejit.kernel(tail_sums.func, target="sim")


def _expected(a, block_M=32, block_N=32):
    out = np.zeros(a.shape[0], np.float64)
    for r in range(a.shape[0]):
        out[r] = a[r, (r // block_M) * block_N:].astype(np.float64).sum()
    return out


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_loop_from_start_to_stop_simulated(stages):
    a = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    out = np.zeros(128, np.float32)
    tail_sums(a, out, stages=stages)
    np.testing.assert_allclose(out, _expected(a), rtol=1e-5, atol=1e-4)


def test_positional_num_stages_and_a_constant_start_simulated():
    a = np.random.default_rng(1).standard_normal((32, 128)).astype(np.float32)
    out = np.zeros(32, np.float32)
    positional_stages(a, out)
    np.testing.assert_allclose(out, a[:, 32:].astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_pipelined_loop_compiles_with_its_copies_in_flight(arch, ptxas):
    a = np.zeros((128, 256), np.float32)
    ptx = tail_sums.compile(a, np.zeros(128, np.float32), target="cuda", arch=arch).ptx
    # the loop's copies are issued ahead (cp.async on sm_80, TMA's mbarriers on sm_90a)
    assert "cp.async" in ptx or "cp.async.bulk.tensor" in ptx
    ptxas(ptx, arch)


def test_a_body_that_assigns_the_loop_variable_is_refused():
    @tilejit.kernel
    def bad(A, Out):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared([32], A.dtype)
            for k in T.Pipelined(1, 4, num_stages=2):
                T.copy(A[k * 32:(k + 1) * 32], s)
                k = k + 1
                Out[bx] = s[0]
    a = np.zeros(128, np.float32)
    with pytest.raises(CompileError, match="assigns the loop variable 'k'"):
        bad(a, np.zeros(1, np.float32))


def test_num_stages_given_twice_is_refused():
    @tilejit.kernel
    def twice(A, Out):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared([32], A.dtype)
            for k in T.Pipelined(0, 4, 2, num_stages=2):
                T.copy(A[k * 32:(k + 1) * 32], s)
            Out[bx] = s[0]
    a = np.zeros(128, np.float32)
    with pytest.raises(CompileError, match="num_stages= given twice"):
        twice(a, np.zeros(1, np.float32))


def splat_doubles(options):
    """TileLang's documentation passes a loop's options as a dict: ``T.Pipelined(n,
    **options)``, the dict a value of the program's closure."""
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "float32")
            for ko in T.Pipelined(4, **options):
                T.copy(A[ko * 64], S)
                for i in T.Parallel(64):
                    B[ko * 64 + i] = S[i] * 2
    return tilejit.compile(main)


def test_options_given_as_a_dict_of_the_closure():
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    kernel = splat_doubles(dict(num_stages=2))
    kernel(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert "cp.async" in kernel.get_kernel_source(arch="sm_80")


def test_options_the_kernel_builds_are_refused_by_name():
    @T.prim_func
    def built(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=64):
            options = dict(num_stages=2)
            for ko in T.Pipelined(4, **options):
                A[ko] = 1
    with pytest.raises(CompileError, match=r"T.Pipelined\(..., \*\*options\): the options "
                                           "must be known at compile time"):
        tilejit.compile(built)(np.zeros(256, np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_loop_from_start_to_stop_on_the_gpu(stages):
    a = torch.randn(256, 512, dtype=torch.float32)
    out = torch.zeros(256, device="cuda")
    tail_sums(a.cuda(), out, stages=stages)
    torch.cuda.synchronize()
    sim = np.zeros(256, np.float32)
    tail_sums_sim(a.numpy(), sim, stages=stages)
    expected = torch.from_numpy(_expected(a.numpy()))
    torch.testing.assert_close(out.cpu().double(), expected, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(out.cpu().numpy(), sim, rtol=1e-5, atol=1e-4)

"""T.any_of / T.all_of: whether any / every element of a tensor region, a shared or a
local tile is nonzero, in an ``if`` test (a block-sparse GEMM skipping masked k blocks)
or an assignment. In simulation against numpy; PTX for sm_80 and sm_90a assembled by
ptxas; with ``-m gpu`` on the device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def block_sparse(A, B, Mask, C, bm: T.constexpr = 64, bn: T.constexpr = 64,
                 bk: T.constexpr = 32, mode: T.constexpr = "any_global"):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        A_s = T.alloc_shared((bm, bk), A.dtype)
        B_s = T.alloc_shared((bk, bn), B.dtype)
        m_s = T.alloc_shared((4,), "bool")
        m_l = T.alloc_local((4,), "bool")
        C_f = T.alloc_fragment((bm, bn), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            for i in T.serial(4):
                m_s[i] = Mask[by, bx, k, i]
                m_l[i] = Mask[by, bx, k, i]
            take = False
            if mode == "any_global":
                take = T.any_of(Mask[by, bx, k, :])
            elif mode == "all_shared":
                take = T.all_of(m_s)
            elif mode == "any_local":
                take = T.any_of(m_l[0:4])
            else:
                take = T.all_of(Mask[by, bx, k, 1:3])
            if take:
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * bm, bx * bn])


MODES = {"any_global": lambda m: m.any(-1), "all_shared": lambda m: m.all(-1),
         "any_local": lambda m: m.any(-1), "all_range": lambda m: m[..., 1:3].all(-1)}


def _case(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    mask = rng.random((2, 2, 4, 4)) > 0.5
    mask[0, 0, 1] = mask[1, 1, 2] = False           # blocks no mode takes
    mask[0, 1, 0] = mask[1, 0, 3] = True            # blocks every mode takes
    mask[0, 0, 2] = [False, True, True, False]      # any and all of [1:3], not all
    return a, b, mask


def _reference(a, b, taken):
    ref = np.zeros((128, 128))
    for i, j, k in zip(*np.nonzero(taken)):
        ref[i * 64:(i + 1) * 64, j * 64:(j + 1) * 64] += (
            a[i * 64:(i + 1) * 64, k * 32:(k + 1) * 32].astype(np.float64)
            @ b[k * 32:(k + 1) * 32, j * 64:(j + 1) * 64])
    return ref


@pytest.mark.parametrize("mode", sorted(MODES))
def test_in_simulation(mode):
    a, b, mask = _case()
    taken = MODES[mode](mask)
    assert 0 < taken.sum() < taken.size         # the mask takes some blocks, not all
    c = np.zeros((128, 128), np.float32)
    block_sparse(a, b, mask, c, mode=mode)
    np.testing.assert_allclose(c, _reference(a, b, taken), rtol=0, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a, b, mask = _case()
    c = np.zeros((128, 128), np.float32)
    for mode in MODES:
        ptx = block_sparse.compile(a, b, mask, c, mode=mode, target="cuda", arch=arch).ptx
        ptxas(ptx, arch)


def test_a_fragment_is_refused_at_its_line():
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((128,), T.float32)
            T.copy(X[0], F)
            if T.any_of(F):
                Y[0] = 1.0
    with pytest.raises(tilejit.CompileError, match="fragment 'F'") as info:
        bad.compile(np.zeros(128, np.float32), np.zeros(1, np.float32), target="cuda",
                    arch="sm_90a")
    assert "T.any_of(F)" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", sorted(MODES))
def test_on_the_gpu(mode):
    a, b, mask = _case(1)
    c = torch.zeros(128, 128, device="cuda")
    block_sparse(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                 torch.from_numpy(mask).cuda(), c, mode=mode)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), _reference(a, b, MODES[mode](mask)),
                               rtol=0, atol=1e-3)


def test_a_loop_condition_is_refused_at_its_line():
    @tilejit.kernel
    def looping(M, Y):
        with T.Kernel(1, threads=32) as bx:
            m = T.alloc_local((4,), "bool")
            for i in T.serial(4):
                m[i] = M[i]
            n = 0
            while T.any_of(m) and n < 3:
                n += 1
            Y[0] = n
    for target in ("cuda", "sim"):
        with pytest.raises(tilejit.CompileError, match=r"write it in an `if` test") as info:
            if target == "cuda":
                looping.compile(np.zeros(4, bool), np.zeros(1, np.int32), target="cuda",
                                arch="sm_90a")
            else:
                tilejit.kernel(looping.func, target="sim")(np.zeros(4, bool),
                                                            np.zeros(1, np.int32))
        assert "while T.any_of(m)" in str(info.value)


def test_conditions_for_a_buffer_are_told_to_use_and():
    """TileLang's control-flow guide writes ``T.all_of(i < M, j < N)``; its T.all_of
    takes one buffer: the error says so and what to write."""
    @tilejit.kernel
    def guarded(A):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                if T.all_of(i < 64, i >= 0):
                    A[i] = 1
    with pytest.raises(tilejit.CompileError, match=r"T.all_of\(buffer\) takes one buffer or "
                       r"region .*got T.all_of\(i < 64, i >= 0\); for conditions write them "
                       r"with `and`"):
        guarded(np.zeros(64, np.float32))

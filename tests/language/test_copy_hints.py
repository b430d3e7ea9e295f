"""TileLang's lowering hints to T.copy (disable_tma=, annotations=, coalesced_width=,
eviction_policy=, loop_layout=) are accepted and change nothing: the same results in
simulation, the same PTX; another keyword is still an error."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def add(A, B, C, hinted: T.constexpr = True, bm: T.constexpr = 16, bn: T.constexpr = 32):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        R = T.alloc_shared((bm, bn), A.dtype)
        if hinted:
            T.copy(A[by * bm, bx * bn], S, annotations={"prefer_instruction": "tma"})
            T.copy(B[by * bm, bx * bn], R, disable_tma=True, coalesced_width=4,
                   eviction_policy="evict_first")
        else:
            T.copy(A[by * bm, bx * bn], S)
            T.copy(B[by * bm, bx * bn], R)
        for i, j in T.Parallel(bm, bn):
            S[i, j] = S[i, j] + R[i, j]
        T.copy(S, C[by * bm, bx * bn])


def test_hints_change_nothing():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((40, 70)).astype(np.float32) for _ in range(2))
    c = np.zeros_like(a)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    plain = add.compile(a, b, c, hinted=False, target="cuda", arch="sm_90a").ptx
    hinted = add.compile(a, b, c, hinted=True, target="cuda", arch="sm_90a").ptx
    assert plain == hinted


def test_an_unknown_keyword_is_an_error():
    @tilejit.kernel
    def bad(A, B):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((8, 8), A.dtype)
            T.copy(A[0, 0], S, fast=True)
            T.copy(S, B[0, 0])
    with pytest.raises((tilejit.CompileError, TypeError)):
        bad.compile(np.zeros((8, 8), np.float32), np.zeros((8, 8), np.float32),
                    target="cuda", arch="sm_90a")


@tilejit.kernel
def pipelined_sum(A, B, hinted: T.constexpr = True):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((4, 32), A.dtype)
        F = T.alloc_fragment((4, 32), "float32")
        T.clear(F)
        if hinted:
            for k in T.Pipelined(4, num_stages=2, annotations={"software_pipeline": 1}):
                T.copy(A[k * 4, 0], S)
                for i, j in T.Parallel(4, 32):
                    F[i, j] += S[i, j]
        else:
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 4, 0], S)
                for i, j in T.Parallel(4, 32):
                    F[i, j] += S[i, j]
        T.copy(F, B)


def test_a_pipelined_loops_annotations_change_nothing():
    """``T.Pipelined(..., annotations={...})``: a dict written in the call, TileLang's
    hint to its lowering, accepted and ignored."""
    a = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    b = np.zeros((4, 32), np.float32)
    pipelined_sum(a, b)
    np.testing.assert_allclose(b, a.reshape(4, 4, 32).sum(0), rtol=1e-6)
    plain = pipelined_sum.compile(a, b, hinted=False, target="cuda", arch="sm_90a").ptx
    hinted = pipelined_sum.compile(a, b, hinted=True, target="cuda", arch="sm_90a").ptx
    assert plain == hinted

"""Reductions and scans over tiles: T.reduce_sum / reduce_max / reduce_min /
reduce_abssum / reduce_absmax over fragments (the T.Parallel layout and the mma
accumulator layout), shared and local tiles, with the reduced dimension kept or dropped
and clear=True/False; T.cumsum on shared, local and fragment tiles; fragments indexed by a subset
of a T.Parallel loop's indices; the CompileErrors; the softmax / norm / row-sum examples.
In simulation against float64 numpy/torch references; PTX for sm_80 and sm_90a assembled
with ptxas; with ``-m gpu`` the important kernels on the device against torch (float64)
and against the simulator."""
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

from norms import layer_norm, rms_norm
from row_sum import row_sum
from softmax import online_softmax, softmax

PTXAS = shutil.which("ptxas")

def _xf(*values):
    """Shapes that once hit a compiler bug (a subset-indexed fragment in a loop whose
    fragment has few slots per thread); kept as regression cases."""
    return pytest.param(*values)


ARCHS = ["sm_80", "sm_90a"]
OPS = ["sum", "max", "min", "abssum", "absmax"]


# ----------------------------------------------------------------------------- kernels

@tilejit.kernel
def red_rows(X, Out, op: T.constexpr = "sum", dim: T.constexpr = 1, clear: T.constexpr = True,
             keep: T.constexpr = False, bm: T.constexpr = 16, threads: T.constexpr = 128):
    """Each block reduces bm whole rows of X (a fragment) along dim 1 into Out[:, 0]; with
    clear=False the old Out values are loaded into the result first."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
        x = T.alloc_fragment((bm, N), T.float32)
        r = T.alloc_fragment((bm, 1) if keep else (bm,), T.float32)
        T.copy(X[bx * bm, 0], x)
        if not clear:
            if keep:
                T.copy(Out[bx * bm, 0], r)
            else:
                T.copy(Out[bx * bm:(bx + 1) * bm, 0], r)
        if op == "sum":
            T.reduce_sum(x, r, dim=dim, clear=clear)
        elif op == "max":
            T.reduce_max(x, r, dim=dim, clear=clear)
        elif op == "min":
            T.reduce_min(x, r, dim=dim, clear=clear)
        elif op == "abssum":
            T.reduce_abssum(x, r, dim=dim, clear=clear)
        else:
            T.reduce_absmax(x, r, dim=dim, clear=clear)
        if keep:
            T.copy(r, Out[bx * bm, 0])
        else:
            T.copy(r, Out[bx * bm:(bx + 1) * bm, 0])


@tilejit.kernel
def red_cols(X, Out, op: T.constexpr = "sum", clear: T.constexpr = True,
             keep: T.constexpr = False, bn: T.constexpr = 64):
    """Each block reduces a (M, bn) column strip of X (a fragment) along dim 0 into
    Out[0, :]."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, bn), threads=128) as bx:
        x = T.alloc_fragment((M, bn), T.float32)
        r = T.alloc_fragment((1, bn) if keep else (bn,), T.float32)
        T.copy(X[0, bx * bn], x)
        if not clear:
            if keep:
                T.copy(Out[0, bx * bn], r)
            else:
                T.copy(Out[0, bx * bn:(bx + 1) * bn], r)
        if op == "sum":
            T.reduce_sum(x, r, dim=0, clear=clear)
        elif op == "max":
            T.reduce_max(x, r, dim=0, clear=clear)
        elif op == "min":
            T.reduce_min(x, r, dim=0, clear=clear)
        elif op == "abssum":
            T.reduce_abssum(x, r, dim=0, clear=clear)
        else:
            T.reduce_absmax(x, r, dim=0, clear=clear)
        if keep:
            T.copy(r, Out[0, bx * bn])
        else:
            T.copy(r, Out[0, bx * bn:(bx + 1) * bn])


@tilejit.kernel
def red_vector(X, Out, n: T.constexpr = 256):
    """A 1-d fragment reduced to a (1,) fragment."""
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((n,), T.float32)
        s = T.alloc_fragment((1,), T.float32)
        T.copy(X[0], x)
        T.reduce_sum(x, s, dim=0)
        T.copy(s, Out[0])


@tilejit.kernel
def gemm_reduce(A, B, Out, Cc, op: T.constexpr = "max", block_M: T.constexpr = 128,
                block_N: T.constexpr = 128, block_K: T.constexpr = 32,
                policy: T.constexpr = "Square", threads: T.constexpr = 128):
    """C = A @ B per block in an mma accumulator; Out[:, bx] = the block's row max (or
    sum); Cc = C minus that row statistic (a subset-indexed mma-layout fragment)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        r = T.alloc_fragment((block_M,), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f, policy=policy)
        if op == "max":
            T.reduce_max(C_f, r, dim=1)
        else:
            T.reduce_sum(C_f, r, dim=1)
        T.copy(r, Out[by * block_M:(by + 1) * block_M, bx])
        for i, j in T.Parallel(block_M, block_N):
            C_f[i, j] = C_f[i, j] - r[i]
        T.copy(C_f, Cc[by * block_M, bx * block_N])


@tilejit.kernel
def red_shared(X, RowSum, RowMax, ColMin, ColAbsSum, bm: T.constexpr = 32,
               bn: T.constexpr = 64):
    """A shared tile reduced into fragments and into shared tiles, along both dims."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), T.float32)
        rs = T.alloc_fragment((bm,), T.float32)
        rm = T.alloc_shared((bm,), T.float32)
        cm = T.alloc_fragment((1, bn), T.float32)
        ca = T.alloc_shared((1, bn), T.float32)
        T.copy(X[by * bm, bx * bn], S)
        T.reduce_sum(S, rs, dim=1)
        T.reduce_max(S, rm, dim=-1)
        T.reduce_min(S, cm, dim=0)
        T.reduce_abssum(S, ca, dim=0)
        T.copy(rs, RowSum[by * bm:(by + 1) * bm, bx])
        T.copy(rm, RowMax[by * bm:(by + 1) * bm, bx])
        T.copy(cm, ColMin[by, bx * bn])
        T.copy(ca, ColAbsSum[by, bx * bn])


@tilejit.kernel
def red_local(X, RowSum, ColMax, RowAbsMax):
    """A local (per-thread) tile reduced into local tiles."""
    with T.Kernel(1, threads=32) as bx:
        L = T.alloc_local((4, 8), T.float32)
        rs = T.alloc_local((4,), T.float32)
        cm = T.alloc_local((1, 8), T.float32)
        ra = T.alloc_local((4, 1), T.float32)
        for i in T.serial(4):
            for j in T.serial(8):
                L[i, j] = X[i, j]
        T.reduce_sum(L, rs, dim=1)
        T.reduce_max(L, cm, dim=0)
        T.reduce_absmax(L, ra, dim=1)
        T.copy(rs, RowSum[0])
        T.copy(cm, ColMax[0, 0])
        T.copy(ra, RowAbsMax[0, 0])


@tilejit.kernel
def running_max(X, Out, bm: T.constexpr = 8, bn: T.constexpr = 64):
    """clear=False across a serial loop: the running row max over column chunks."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        x = T.alloc_fragment((bm, bn), T.float32)
        m = T.alloc_fragment((bm,), T.float32)
        s = T.alloc_fragment((bm,), T.float32)
        T.fill(m, -T.infinity(T.float32))
        T.clear(s)
        for k in range(T.ceildiv(N, bn)):
            T.copy(X[bx * bm, k * bn], x)
            T.reduce_max(x, m, dim=1, clear=False)
            T.reduce_sum(x, s, dim=1, clear=False)
        T.copy(m, Out[bx * bm:(bx + 1) * bm, 0])
        T.copy(s, Out[bx * bm:(bx + 1) * bm, 1])


@tilejit.kernel
def center_rows(X, Y, bm: T.constexpr = 4):
    """Y = X - mean over the row, then scaled by the row's absmax (subset indices)."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        x = T.alloc_fragment((bm, N), T.float32)
        mean = T.alloc_fragment((bm,), T.float32)
        amax = T.alloc_fragment((bm, 1), T.float32)
        T.copy(X[bx * bm, 0], x)
        T.reduce_sum(x, mean, dim=1)
        for i in T.Parallel(bm):
            mean[i] = mean[i] / N
        for i, j in T.Parallel(bm, N):
            x[i, j] = x[i, j] - mean[i]
        T.reduce_absmax(x, amax, dim=1)
        T.copy(amax, Y[bx * bm, N])
        T.copy(x, Y[bx * bm, 0])


@tilejit.kernel
def scan_shared(X, Y, dim: T.constexpr = 1, reverse: T.constexpr = False,
                inplace: T.constexpr = True, bm: T.constexpr = 16, bn: T.constexpr = 32):
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), X.dtype)
        D = T.alloc_shared((bm, bn), T.float32)
        T.copy(X[by * bm, bx * bn], S)
        if inplace:
            T.cumsum(S, dim=dim, reverse=reverse)
            T.copy(S, Y[by * bm, bx * bn])
        else:
            T.cumsum(S, D, dim=dim, reverse=reverse)
            T.copy(D, Y[by * bm, bx * bn])


@tilejit.kernel
def scan_local(X, Y, dim: T.constexpr = 1, reverse: T.constexpr = False):
    with T.Kernel(1, threads=32) as bx:
        L = T.alloc_local((4, 8), T.float32)
        D = T.alloc_local((4, 8), T.float32)
        for i in T.serial(4):
            for j in T.serial(8):
                L[i, j] = X[i, j]
        T.cumsum(L, D, dim=dim, reverse=reverse)
        for i in T.serial(4):
            for j in T.serial(8):
                Y[i, j] = D[i, j]


red_rows_sim = tilejit.kernel(red_rows.func, target="sim")
red_cols_sim = tilejit.kernel(red_cols.func, target="sim")
gemm_reduce_sim = tilejit.kernel(gemm_reduce.func, target="sim")
red_shared_sim = tilejit.kernel(red_shared.func, target="sim")
running_max_sim = tilejit.kernel(running_max.func, target="sim")
center_rows_sim = tilejit.kernel(center_rows.func, target="sim")
scan_shared_sim = tilejit.kernel(scan_shared.func, target="sim")
softmax_sim = tilejit.kernel(softmax.func, target="sim")
online_softmax_sim = tilejit.kernel(online_softmax.func, target="sim")
layer_norm_sim = tilejit.kernel(layer_norm.func, target="sim")
rms_norm_sim = tilejit.kernel(rms_norm.func, target="sim")
row_sum_sim = tilejit.kernel(row_sum.func, target="sim")


# ----------------------------------------------------------------------------- references

def _reduce_ref(x, op, axis, old=None):
    x = np.asarray(x, np.float64)
    if op in ("abssum", "absmax"):
        x = np.abs(x)
    f = {"sum": np.add, "max": np.fmax, "min": np.fmin, "abssum": np.add, "absmax": np.fmax}[op]
    out = f.reduce(x, axis=axis)
    if old is not None:
        out = f(np.asarray(old, np.float64), out)
    return out


def _rand(shape, seed=0, dtype=np.float32, scale=4.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _tol(op, n):
    return dict(rtol=1e-5, atol=1e-5 * max(n, 1) * 4) if "sum" in op else dict(rtol=0, atol=0)


# ----------------------------------------------------------------------------- simulated

ROW_SHAPES = [((37, 64), 16), ((5, 1), 16), ((1, 128), 16), ((100, 256), 4), ((64, 32), 32)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dim,keep", [(1, False), (1, True), (-1, False)])
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("shape,bm", ROW_SHAPES, ids=[f"{s[0]}x{s[1]}/{b}" for s, b in ROW_SHAPES])
def test_reduce_fragment_rows(op, dim, clear, keep, shape, bm):
    x = _rand(shape, seed=shape[0] + shape[1])
    old = _rand((shape[0], 1), seed=7)
    out = old.copy()
    red_rows(x, out, op=op, dim=dim, clear=clear, keep=keep, bm=bm)
    ref = _reduce_ref(x, op, 1, None if clear else old[:, 0])
    np.testing.assert_allclose(out[:, 0], ref, **_tol(op, shape[1]))


COL_SHAPES = [((32, 100), 64), ((1, 64), 64), ((8, 200), 128), ((64, 16), 16)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape,bn", COL_SHAPES, ids=[f"{s[0]}x{s[1]}/{b}" for s, b in COL_SHAPES])
def test_reduce_fragment_columns(op, clear, keep, shape, bn):
    x = _rand(shape, seed=3 * shape[0] + shape[1])
    old = _rand((1, shape[1]), seed=8)
    out = old.copy()
    red_cols(x, out, op=op, clear=clear, keep=keep, bn=bn)
    ref = _reduce_ref(x, op, 0, None if clear else old[0])
    np.testing.assert_allclose(out[0], ref, **_tol(op, shape[0]))


def test_reduce_1d_fragment_to_one_element():
    x = _rand((256,), seed=2)
    out = np.zeros(1, np.float32)
    red_vector(x, out)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)


def test_reduce_fragment_from_float16_input():
    x = _rand((37, 64), seed=5, dtype=np.float16)
    out = np.zeros((37, 1), np.float32)
    red_rows(x, out, op="sum")
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)


GEMM_REDUCE_CASES = [
    # (M, N, K, op, policy, threads)
    (200, 256, 64, op, policy, threads)
    for op in ("max", "sum") for policy in ("Square", "FullRow") for threads in (128, 256)
]


def _gemm_inputs(M, N, K, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    return a.to(device), b.to(device)


def _gemm_reduce_ref(a, b, op, block_N):
    c = a.double().cpu() @ b.double().cpu()
    M, N = c.shape
    blocks = c.reshape(M, N // block_N, block_N)
    stat = blocks.amax(2) if op == "max" else blocks.sum(2)
    return stat, (blocks - stat[:, :, None]).reshape(M, N)


@pytest.mark.parametrize("M,N,K,op,policy,threads", GEMM_REDUCE_CASES)
def test_reduce_gemm_accumulator(M, N, K, op, policy, threads):
    a, b = _gemm_inputs(M, N, K)
    out = torch.full((M, N // 128), float("nan"))
    cc = torch.full((M, N), float("nan"))
    gemm_reduce(a, b, out, cc, op=op, policy=policy, threads=threads)
    stat, centered = _gemm_reduce_ref(a, b, op, 128)
    torch.testing.assert_close(out.double(), stat, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(cc.double(), centered, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("shape", [(64, 128), (100, 70), (1, 1)])
def test_reduce_shared_tiles(shape):
    x = _rand(shape, seed=11)
    M, N = shape
    gm, gn = -(-M // 32), -(-N // 64)
    rs = np.full((gm * 32, gn), np.nan, np.float32)[:M]
    rm, cmin, cabs = rs.copy(), np.full((gm, N), np.nan, np.float32), None
    cabs = cmin.copy()
    red_shared(x, rs, rm, cmin, cabs)
    pad = np.zeros((gm * 32, gn * 64), np.float64)     # the tile reads zeros past X
    pad[:M, :N] = x
    tiles = pad.reshape(gm, 32, gn, 64)
    np.testing.assert_allclose(rs, tiles.sum(3).reshape(gm * 32, gn)[:M],
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(rm, tiles.max(3).reshape(gm * 32, gn)[:M])
    np.testing.assert_array_equal(cmin, tiles.min(1).reshape(gm, gn * 64)[:, :N])
    np.testing.assert_allclose(cabs, np.abs(tiles).sum(1).reshape(gm, gn * 64)[:, :N],
                               rtol=1e-5, atol=1e-4)


def test_reduce_local_tiles():
    x = _rand((4, 8), seed=12)
    rs, cm, ra = np.zeros(4, np.float32), np.zeros((1, 8), np.float32), np.zeros((4, 1),
                                                                               np.float32)
    red_local(x, rs, cm, ra)
    np.testing.assert_allclose(rs, x.astype(np.float64).sum(1), rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(cm[0], x.max(0))
    np.testing.assert_array_equal(ra[:, 0], np.abs(x).max(1))


def _nan_input():
    x = _rand((16, 64), seed=13)
    x[0, 5] = np.nan                     # one NaN: ignored
    x[1, ::2] = np.nan                   # half NaN: ignored
    x[2, :] = np.nan                     # all NaN: NaN
    x[3, 63] = np.nan
    x[4, 0] = np.nan
    x[5, :] = -np.inf                    # -inf row: max is -inf
    return x


@pytest.mark.parametrize("op", ["max", "min", "absmax"])
@pytest.mark.parametrize("clear", [True, False])
def test_max_min_ignore_nan(op, clear):
    x = _nan_input()
    old = _rand((16, 1), seed=14)
    old[6, 0] = np.nan                   # a NaN old value: ignored too
    out = old.copy()
    red_rows(x, out, op=op, clear=clear, bm=16)
    ref = _reduce_ref(x, op, 1, None if clear else old[:, 0])
    np.testing.assert_array_equal(out[:, 0], ref)
    assert np.isnan(out[2, 0]) == clear
    assert not np.isnan(out[[0, 1, 3, 4], 0]).any()


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_ignore_nan_along_columns(op):
    x = _nan_input().T.copy()            # (64, 16)
    out = np.zeros((1, 16), np.float32)
    red_cols(x, out, op=op, bn=16)
    np.testing.assert_array_equal(out[0], _reduce_ref(x, op, 0))
    assert np.isnan(out[0, 2])


@pytest.mark.parametrize("op", ["abssum", "absmax"])
def test_abs_reductions_of_negative_values(op):
    x = -np.abs(_rand((37, 64), seed=15)) - 0.5
    out = np.zeros((37, 1), np.float32)
    red_rows(x, out, op=op)
    ref = np.abs(x.astype(np.float64)).sum(1) if op == "abssum" else np.abs(x).max(1)
    np.testing.assert_allclose(out[:, 0], ref, rtol=1e-5, atol=1e-4)
    assert (out > 0).all()


@pytest.mark.parametrize("shape", [(37, 256), (8, 64), (1, 640)])
def test_clear_false_accumulates_over_chunks(shape):
    x = _rand(shape, seed=16)
    out = np.zeros((shape[0], 2), np.float32)
    running_max(x, out)
    np.testing.assert_array_equal(out[:, 0], x.max(1))
    np.testing.assert_allclose(out[:, 1], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("shape", [_xf((37, 64)), _xf((4, 1)), (9, 512), (64, 256)])
def test_subset_indexed_fragment(shape):
    x = _rand(shape, seed=17)
    M, N = shape
    y = np.full((M, N + 1), np.nan, np.float32)
    center_rows(x, y)
    xd = x.astype(np.float64)
    c = xd - xd.mean(1, keepdims=True)
    np.testing.assert_allclose(y[:, :N], c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[:, N], np.abs(c).max(1), rtol=1e-5, atol=1e-5)


# --- cumsum

def _scan_ref(x, dim, reverse, bm=None, bn=None):
    x = np.asarray(x, np.float64)
    if bm is None:
        tiles = [(slice(None), slice(None))]
    else:
        M, N = x.shape
        tiles = [(slice(i, i + bm), slice(j, j + bn)) for i in range(0, M, bm)
                 for j in range(0, N, bn)]
    out = np.empty_like(x)
    for t in tiles:
        v = x[t]
        out[t] = np.flip(np.cumsum(np.flip(v, dim), dim), dim) if reverse else np.cumsum(v, dim)
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("shape", [(16, 32), (40, 70)])
def test_cumsum_shared(dim, reverse, inplace, shape):
    x = _rand(shape, seed=18)
    y = np.full(shape, np.nan, np.float32)
    scan_shared(x, y, dim=dim, reverse=reverse, inplace=inplace)
    # edge tiles read zeros past X: they add nothing to a prefix that stays inside X
    np.testing.assert_allclose(y, _scan_ref(x, dim % 2, reverse, 16, 32), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_local(dim, reverse):
    x = _rand((4, 8), seed=19)
    y = np.zeros((4, 8), np.float32)
    scan_local(x, y, dim=dim, reverse=reverse)
    np.testing.assert_allclose(y, _scan_ref(x, dim, reverse), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- errors

def _compile(kernel, *args, **kw):
    return kernel.compile(*args, target="cuda", arch="sm_90", **kw)


def test_writing_subset_indexed_fragment_is_an_error():
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((4, 64), T.float32)
            m = T.alloc_fragment((4,), T.float32)
            T.copy(X[0, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(4, 64):
                m[i] = x[i, j]
            T.copy(m, Y[0])
    with pytest.raises(tilejit.CompileError, match="only some of the loop's indices"):
        _compile(bad, np.zeros((4, 64), np.float32), np.zeros(4, np.float32))


def test_subset_index_without_a_full_fragment_follows_the_row_fragment():
    # no fragment has both indices: the loop takes the row fragment's layout, every j of
    # a row done by a thread holding m[i] (passes/layout_inference.py; TileLang's
    # flash-decoding S_shared[h, k] = ... / logsum[h])
    @tilejit.kernel
    def rows(X, Y):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((4, 64), T.float32)
            m = T.alloc_fragment((4,), T.float32)
            S = T.alloc_shared((4, 64), T.float32)
            T.copy(X[0, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(4, 64):
                S[i, j] = m[i] + j
            T.copy(S, Y[0, 0])
    x = np.random.rand(4, 64).astype(np.float32)
    y = np.zeros((4, 64), np.float32)
    rows(x, y)
    np.testing.assert_array_equal(y, x.max(axis=1, keepdims=True) + np.arange(64, dtype=np.float32))
    _compile(rows, np.zeros((4, 64), np.float32), np.zeros((4, 64), np.float32))


@pytest.mark.parametrize("dst_shape,dim", [((4, 2), 1), ((64,), 1), ((4,), 0), ((2, 64), 0)])
def test_reduce_dst_of_wrong_shape_is_an_error(dst_shape, dim):
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((4, 64), T.float32)
            r = T.alloc_fragment(dst_shape, T.float32)
            T.copy(X[0, 0], x)
            T.reduce_sum(x, r, dim=dim)
            T.clear(r)
    pat = (re.escape(str(dst_shape)) + ".*" + re.escape("(4, 64)") + ".*"
           + re.escape(str(((64,), (4,))[dim])))
    with pytest.raises(tilejit.CompileError, match=pat):
        _compile(bad, np.zeros((4, 64), np.float32), np.zeros((4, 64), np.float32))


def test_reduce_dim_out_of_range_is_an_error():
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((4, 64), T.float32)
            r = T.alloc_fragment((4,), T.float32)
            T.copy(X[0, 0], x)
            T.reduce_sum(x, r, dim=2)
            T.copy(r, Y[0])
    with pytest.raises(tilejit.CompileError, match="dim must be an integer"):
        _compile(bad, np.zeros((4, 64), np.float32), np.zeros(4, np.float32))


def test_tilelang_parameters_order_names_and_defaults():
    """TileLang's signatures: ``reduce_max(buffer, out, dim, clear, batch, nan_propagate,
    annotations)`` (batch before nan_propagate), ``out=`` by keyword, ``annotations=``
    accepted, and the scans along dim 0 unless told."""
    @T.prim_func
    def main(X: T.Tensor((8, 64), T.float32), M: T.Tensor((8,), T.float32),
             C: T.Tensor((8, 64), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((8, 64), T.float32)
            m = T.alloc_fragment((8,), T.float32)
            s = T.alloc_shared((8, 64), T.float32)
            T.copy(X, x)
            T.reduce_max(x, m, 1, True, 2, True, annotations={"hint": 1})
            T.reduce_sum(buffer=x, out=m, dim=1, clear=False)
            T.copy(m, M)
            T.copy(X, s)
            T.cumsum(s, annotations=None)
            T.copy(s, C)
    x = torch.randn(8, 64)
    x[2, 5] = float("nan")
    m, c = tilejit.compile(main, out_idx=[1, 2])(x)
    want = x.max(1).values + x.sum(1)
    assert torch.isnan(m[2]) and torch.isnan(want[2])
    torch.testing.assert_close(m, want, equal_nan=True)
    torch.testing.assert_close(c, x.cumsum(0), equal_nan=True)
    with pytest.raises(tilejit.CompileError, match=r"T.reduce_sum: unknown argument 'src'"):
        @T.prim_func
        def old(X: T.Tensor((8, 64), T.float32), M: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=128):
                x = T.alloc_fragment((8, 64), T.float32)
                m = T.alloc_fragment((8,), T.float32)
                T.copy(X, x)
                T.reduce_sum(src=x, dst=m, dim=1)
                T.copy(m, M)
        tilejit.compile(old, out_idx=[1])(x)


@tilejit.kernel
def scan_fragments(X, Y, bm: T.constexpr = 8, bn: T.constexpr = 64, rev: T.constexpr = False):
    """Row scans of a fragment into another, a fragment epilogue, then an in-place column
    scan (both go through the shared scratch of the scan)."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        x = T.alloc_fragment((bm, bn), T.float32)
        y = T.alloc_fragment((bm, bn), T.float32)
        T.copy(X[bx * bm, 0], x)
        T.cumsum(x, y, dim=1, reverse=rev)
        for i, j in T.Parallel(bm, bn):
            y[i, j] = y[i, j] * 2.0
        T.cumsum(y, dim=0)
        T.copy(y, Y[bx * bm, 0])


def _scan_reference(x, bm, rev):
    m, n = x.shape
    pad = -(-m // bm) * bm
    xp = torch.zeros(pad, n, dtype=torch.float64)
    xp[:m] = x.double()
    c = (xp.flip(1).cumsum(1).flip(1) if rev else xp.cumsum(1)) * 2
    return c.reshape(pad // bm, bm, n).cumsum(1).reshape(pad, n)[:m]


@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("m", [8, 20])
def test_cumsum_of_fragments(m, rev):
    x = torch.randn(m, 64)
    y = torch.zeros(m, 64)
    scan_fragments(x, y, rev=rev)
    torch.testing.assert_close(y.double(), _scan_reference(x, 8, rev), rtol=1e-4, atol=1e-4)


def test_cumsum_of_fragments_ptx():
    ptx = scan_fragments.compile(_f32(64, 64), _f32(64, 64), target="cuda", arch="sm_90").ptx
    assert "bar.sync" in ptx and "st.shared" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("rev", [False, True])
def test_cumsum_of_fragments_gpu(rev):
    x = torch.randn(1000, 64, device="cuda")
    y = torch.zeros(1000, 64, device="cuda")
    scan_fragments(x, y, rev=rev)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _scan_reference(x.cpu(), 8, rev),
                               rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------------------------- examples

def _x(shape, dtype=torch.float16, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).to(device)


def _softmax_ref(x):
    return torch.softmax(x.double().cpu(), dim=1)


SOFTMAX_CASES = [_xf((37, 256), 1), ((37, 256), 4), _xf((7, 1), 4), ((64, 512), 2),
                 ((5, 1024), 1), ((37, 64), 16)]


@pytest.mark.parametrize("shape,bm", SOFTMAX_CASES)
def test_softmax_example(shape, bm):
    x = _x(shape, seed=20)
    y = torch.zeros_like(x)
    softmax(x, y, block_M=bm)
    torch.testing.assert_close(y.double(), _softmax_ref(x), rtol=0, atol=2e-3)


ONLINE_CASES = [_xf((37, 1000), 2, 256), ((5, 4096), 1, 2048), _xf((9, 1), 4, 64),
                _xf((16, 300), 4, 128), ((37, 1000), 4, 256), _xf((9, 700), 1, 512),
                ((9, 700), 1, 1024), ((16, 300), 8, 128)]


@pytest.mark.parametrize("shape,bm,bn", ONLINE_CASES)
def test_online_softmax_example(shape, bm, bn):
    x = _x(shape, seed=21) * 3
    y = torch.zeros_like(x)
    online_softmax(x, y, block_M=bm, block_N=bn)
    torch.testing.assert_close(y.double(), _softmax_ref(x), rtol=0, atol=2e-3)


def _layer_norm_ref(x, w, b):
    return torch.nn.functional.layer_norm(x.double().cpu(), (x.shape[1],), w.double().cpu(),
                                          b.double().cpu(), 1e-5)


def _rms_norm_ref(x, w):
    xd = x.double().cpu()
    return xd * torch.rsqrt(xd.pow(2).mean(1, keepdim=True) + 1e-5) * w.double().cpu()


NORM_CASES = [((37, 512), 4), _xf((3, 1), 2), _xf((16, 256), 1), ((10, 128), 8),
              ((5, 1024), 1), _xf((33, 1), 64)]


@pytest.mark.parametrize("shape,bm", NORM_CASES)
def test_layer_norm_example(shape, bm):
    x, w, b = _x(shape, seed=22), _x(shape[1:], seed=23), _x(shape[1:], seed=24)
    y = torch.zeros_like(x)
    layer_norm(x, w, b, y, 1e-5, block_M=bm)
    torch.testing.assert_close(y.double(), _layer_norm_ref(x, w, b), rtol=0, atol=2e-2)


@pytest.mark.parametrize("shape,bm", NORM_CASES)
def test_rms_norm_example(shape, bm):
    x, w = _x(shape, seed=25), _x(shape[1:], seed=26)
    y = torch.zeros_like(x)
    rms_norm(x, w, y, 1e-5, block_M=bm)
    torch.testing.assert_close(y.double(), _rms_norm_ref(x, w), rtol=0, atol=2e-2)


ROW_SUM_CASES = [((37, 5000), 4, 1024), ((1, 1), 4, 64), ((10, 300), 8, 128), ((64, 256), 4, 256)]


@pytest.mark.parametrize("shape,bm,bn", ROW_SUM_CASES)
def test_row_sum_example(shape, bm, bn):
    x = _x(shape, seed=27)
    s = torch.full((shape[0],), float("nan"))
    row_sum(x, s, block_M=bm, block_N=bn)
    torch.testing.assert_close(s.double(), x.double().sum(1), rtol=1e-5, atol=1e-2)


# ----------------------------------------------------------------------------- PTX

def _f16(*shape):
    return np.zeros(shape, np.float16)


def _f32(*shape):
    return np.zeros(shape, np.float32)


# (name, kernel, arguments, constexprs, PTX must contain, must not contain)
PTX_CASES = [
    # one row over 128 threads: lanes and warps combine
    ("rows_one_row_sum", red_rows, (_f32(64, 1024), _f32(64, 1)), {"bm": 1},
     ["shfl.sync.bfly", "bar.sync"], []),
    ("rows_one_row_max_keep_accumulate", red_rows, (_f32(64, 1024), _f32(64, 1)),
     {"bm": 1, "op": "max", "keep": True, "clear": False}, ["shfl.sync.bfly", "bar.sync",
                                                             "max.f32"], []),
    # 8 lanes per row (32 columns of 4): only lanes combine
    ("rows_in_warp_absmax", red_rows, (_f32(64, 32), _f32(64, 1)), {"bm": 32, "op": "absmax"},
     ["shfl.sync.bfly", "abs.f32"], ["bar.sync"]),
    # rows spread over 256 threads
    ("rows_256_threads_min", red_rows, (_f16(64, 2048), _f32(64, 1)),
     {"bm": 1, "op": "min", "threads": 256}, ["shfl.sync.bfly", "bar.sync", "min.f32"], []),
    ("cols_sum", red_cols, (_f32(32, 128), _f32(1, 128)), {}, ["bar.sync"], []),
    ("gemm_max_square", gemm_reduce, (_f16(256, 64), _f16(64, 256), _f32(256, 2),
                                      _f32(256, 256)), {}, ["shfl.sync.bfly", "mma.sync"], []),
    ("gemm_sum_fullrow_256", gemm_reduce, (_f16(256, 64), _f16(64, 256), _f32(256, 2),
                                           _f32(256, 256)),
     {"op": "sum", "policy": "FullRow", "threads": 256}, ["shfl.sync.bfly", "mma.sync"], []),
    ("gemm_sum_square_256", gemm_reduce, (_f16(256, 64), _f16(64, 256), _f32(256, 2),
                                          _f32(256, 256)),
     {"op": "sum", "threads": 256}, ["shfl.sync.bfly", "mma.sync"], []),
    ("shared", red_shared, (_f32(64, 128), _f32(64, 2), _f32(64, 2), _f32(2, 128),
                            _f32(2, 128)), {}, ["bar.sync", "ld.shared"], ["shfl.sync"]),
    ("local", red_local, (_f32(4, 8), _f32(4), _f32(1, 8), _f32(4, 1)), {}, [],
     ["bar.sync", "shfl.sync"]),
    ("running_max", running_max, (_f32(64, 512), _f32(64, 2)), {}, ["shfl.sync.bfly"], []),
    ("center_rows", center_rows, (_f32(64, 512), _f32(64, 513)), {}, ["shfl.sync.bfly"], []),
    ("scan_shared", scan_shared, (_f32(64, 64), _f32(64, 64)), {"reverse": True},
     ["bar.sync", "ld.shared"], []),
    ("scan_local", scan_local, (_f32(4, 8), _f32(4, 8)), {"dim": 0}, [], ["bar.sync"]),
    ("softmax", softmax, (_f16(64, 4096), _f16(64, 4096)), {}, ["shfl.sync.bfly", "bar.sync"],
     []),
    ("online_softmax", online_softmax, (_f16(64, 8192), _f16(64, 8192)), {},
     ["shfl.sync.bfly", "bar.sync"], []),
    ("layer_norm", layer_norm, (_f16(64, 4096), _f16(4096), _f16(4096), _f16(64, 4096), 1e-5),
     {}, ["shfl.sync.bfly", "bar.sync"], []),
    ("rms_norm", rms_norm, (_f16(64, 4096), _f16(4096), _f16(64, 4096), 1e-5), {},
     ["shfl.sync.bfly", "bar.sync"], []),
    ("row_sum", row_sum, (_f16(64, 4096), _f32(64)), {}, ["shfl.sync.bfly", "bar.sync"], []),
]


def _assemble(ptx, arch, tmp_path):
    path = tmp_path / f"k_{arch}.ptx"
    path.write_text(ptx)
    out = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(path), "-o", str(path) + ".cubin"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stderr


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,kernel,args,constexprs,must,must_not", PTX_CASES,
                         ids=[c[0] for c in PTX_CASES])
def test_reduction_ptx_assembles_without_spills(name, kernel, args, constexprs, must,
                                                must_not, arch, tmp_path):
    ptx = kernel.compile(*args, target="cuda", arch=arch, **constexprs).ptx
    assert f".target {arch}" in ptx
    for instruction in must:
        if arch == "sm_90a" and instruction.startswith("mma.sync"):
            instruction = "wgmma.mma_async"          # T.gemm on Hopper's warpgroup MMA
        assert instruction in ptx, f"{name}: expected {instruction} in its PTX"
    for instruction in must_not:
        assert instruction not in ptx, f"{name}: did not expect {instruction} in its PTX"
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    info = _assemble(ptx, arch, tmp_path)
    spills = re.findall(r"(\d+) bytes spill stores", info)
    assert spills and all(s == "0" for s in spills), info


def test_cross_warp_reductions_use_shared_scratch():
    """Square (2x2 warps at 128 threads) splits a row over two warps: a shared scratch;
    FullRow gives each warp whole rows: none."""
    a, b, out, cc = _f16(256, 64), _f16(64, 256), _f32(256, 2), _f32(256, 256)
    base = 2 * (128 * 32 * 2 + 32 * 128 * 2)            # two stages of A_s and B_s
    square = gemm_reduce.compile(a, b, out, cc, target="cuda", arch="sm_80").shared_bytes
    full_row = gemm_reduce.compile(a, b, out, cc, target="cuda", arch="sm_80",
                                   policy="FullRow").shared_bytes
    assert full_row == base
    assert square > base
    one_row = red_rows.compile(_f32(64, 1024), _f32(64, 1), target="cuda", arch="sm_90", bm=1)
    assert one_row.shared_bytes == 4 * 4                # 4 warps x 1 partial, float32
    in_warp = red_rows.compile(_f32(64, 32), _f32(64, 1), target="cuda", arch="sm_90", bm=32)
    assert in_warp.shared_bytes == 0


def _chain_depth_before_shuffles(ptx, opcode):
    """The longest chain of dependent ``opcode`` instructions before the first shfl.sync
    (dataflow on the PTX's virtual registers, each defined once)."""
    depth = {}
    for dst, srcs in re.findall(rf"^\s*{re.escape(opcode)}\s+(%\w+),([^;]*);",
                                ptx[:ptx.index("shfl.sync")], re.M):
        depth[dst] = 1 + max((depth.get(s, 0) for s in re.findall(r"%\w+", srcs)), default=0)
    return max(depth.values(), default=0)


@pytest.mark.parametrize("op,opcode", [("max", "max.f32"), ("sum", "add.f32")])
def test_thread_local_reduction_is_a_balanced_tree(op, opcode):
    """Each thread combines its own values of a row pairwise before the butterflies: with
    FullRow at 128 threads a thread holds 32 values of each of its rows of the 128x128
    mma accumulator, combined in a tree of depth log2 32 = 5. The slot-order chain it
    replaces was 31 dependent max.f32 / add.f32 deep (the row max of FlashAttention's
    scores lies between its two GEMMs)."""
    ptx = gemm_reduce.compile(_f16(256, 64), _f16(64, 256), _f32(256, 2), _f32(256, 256),
                              target="cuda", arch="sm_90", op=op, policy="FullRow").ptx
    assert _chain_depth_before_shuffles(ptx, opcode) <= 5


# ----------------------------------------------------------------------------- GPU

def _gpu_check(fn_gpu, fn_sim, make_args, out_indices, rtol, atol, **kw):
    """Run on the device and in the simulator; compare both to each other; return the
    device results."""
    args = make_args()
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    fn_gpu(*gpu_args, **kw)
    torch.cuda.synchronize()
    sim_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fn_sim(*sim_args, **kw)
    for k in out_indices:
        torch.testing.assert_close(gpu_args[k].cpu(), sim_args[k], rtol=rtol, atol=atol,
                                   equal_nan=True)
    return [gpu_args[k].cpu() for k in out_indices]


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape,bm", ROW_SHAPES + [((1000, 1024), 1), ((333, 512), 8)],
                         ids=[f"{s[0]}x{s[1]}/{b}" for s, b in ROW_SHAPES]
                         + ["1000x1024/1", "333x512/8"])
def test_gpu_reduce_fragment_rows(op, clear, keep, shape, bm):
    x = torch.from_numpy(_rand(shape, seed=shape[0] + shape[1]))
    old = torch.from_numpy(_rand((shape[0], 1), seed=7))
    tol = _tol(op, shape[1])
    (got,) = _gpu_check(red_rows, red_rows_sim, lambda: [x, old.clone()], [1], op=op,
                        clear=clear, keep=keep, bm=bm, **tol)
    ref = _reduce_ref(x.numpy(), op, 1, None if clear else old[:, 0].numpy())
    np.testing.assert_allclose(got[:, 0].numpy(), ref, **tol)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape,bn", COL_SHAPES, ids=[f"{s[0]}x{s[1]}/{b}" for s, b in COL_SHAPES])
def test_gpu_reduce_fragment_columns(op, clear, keep, shape, bn):
    x = torch.from_numpy(_rand(shape, seed=3 * shape[0] + shape[1]))
    old = torch.from_numpy(_rand((1, shape[1]), seed=8))
    tol = _tol(op, shape[0])
    (got,) = _gpu_check(red_cols, red_cols_sim, lambda: [x, old.clone()], [1], op=op,
                        clear=clear, keep=keep, bn=bn, **tol)
    ref = _reduce_ref(x.numpy(), op, 0, None if clear else old[0].numpy())
    np.testing.assert_allclose(got[0].numpy(), ref, **tol)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["max", "min", "absmax"])
@pytest.mark.parametrize("clear", [True, False])
def test_gpu_max_min_ignore_nan(op, clear):
    x = torch.from_numpy(_nan_input())
    old = torch.from_numpy(_rand((16, 1), seed=14))
    old[6, 0] = float("nan")
    (got,) = _gpu_check(red_rows, red_rows_sim, lambda: [x, old.clone()], [1], op=op,
                        clear=clear, bm=16, rtol=0, atol=0)
    np.testing.assert_array_equal(got[:, 0].numpy(),
                                  _reduce_ref(x.numpy(), op, 1, None if clear else old[:, 0]))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,op,policy,threads", GEMM_REDUCE_CASES + [
    (1000, 1024, 512, op, policy, threads)
    for op in ("max", "sum") for policy in ("Square", "FullRow", "FullCol")
    for threads in (128, 256)])
def test_gpu_reduce_gemm_accumulator(M, N, K, op, policy, threads):
    a, b = _gemm_inputs(M, N, K, device="cuda")
    out = torch.full((M, N // 128), float("nan"), device="cuda")
    cc = torch.full((M, N), float("nan"), device="cuda")
    gemm_reduce(a, b, out, cc, op=op, policy=policy, threads=threads)
    torch.cuda.synchronize()
    stat, centered = _gemm_reduce_ref(a, b, op, 128)
    torch.testing.assert_close(out.double().cpu(), stat, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(cc.double().cpu(), centered, rtol=1e-4, atol=1e-2)
    if M * N * K <= 256 * 256 * 64 * 4:
        out_s = torch.full((M, N // 128), float("nan"))
        cc_s = torch.full((M, N), float("nan"))
        gemm_reduce_sim(a.cpu(), b.cpu(), out_s, cc_s, op=op, policy=policy, threads=threads)
        torch.testing.assert_close(out.cpu(), out_s, rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(cc.cpu(), cc_s, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 128), (100, 70), (1000, 1000)])
def test_gpu_reduce_shared_tiles(shape):
    x = torch.from_numpy(_rand(shape, seed=11))
    M, N = shape
    gm, gn = -(-M // 32), -(-N // 64)

    def args():
        return [x, torch.full((M, gn), float("nan")), torch.full((M, gn), float("nan")),
                torch.full((gm, N), float("nan")), torch.full((gm, N), float("nan"))]
    rs, rm, cmin, cabs = _gpu_check(red_shared, red_shared_sim, args, [1, 2, 3, 4],
                                    rtol=1e-5, atol=1e-4)
    pad = np.zeros((gm * 32, gn * 64), np.float64)
    pad[:M, :N] = x.numpy()
    tiles = pad.reshape(gm, 32, gn, 64)
    np.testing.assert_allclose(rs.numpy(),
                               tiles.sum(3).reshape(gm * 32, gn)[:M],
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(rm.numpy(),
                                  tiles.max(3).reshape(gm * 32, gn)[:M])
    np.testing.assert_array_equal(cmin.numpy(), tiles.min(1).reshape(gm, gn * 64)[:, :N])
    np.testing.assert_allclose(cabs.numpy(), np.abs(tiles).sum(1).reshape(gm, gn * 64)[:, :N],
                               rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_gpu_reduce_and_scan_local_tiles():
    x = torch.from_numpy(_rand((4, 8), seed=12)).cuda()
    rs, cm, ra = torch.zeros(4, device="cuda"), torch.zeros(1, 8, device="cuda"), \
        torch.zeros(4, 1, device="cuda")
    red_local(x, rs, cm, ra)
    xn = x.cpu().numpy()
    np.testing.assert_allclose(rs.cpu().numpy(), xn.astype(np.float64).sum(1), rtol=1e-6,
                               atol=1e-5)
    np.testing.assert_array_equal(cm.cpu().numpy()[0], xn.max(0))
    np.testing.assert_array_equal(ra.cpu().numpy()[:, 0], np.abs(xn).max(1))
    for dim in (0, 1):
        for reverse in (False, True):
            y = torch.zeros(4, 8, device="cuda")
            scan_local(x, y, dim=dim, reverse=reverse)
            np.testing.assert_allclose(y.cpu().numpy(), _scan_ref(xn, dim, reverse),
                                       rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("shape", [(40, 70), (1024, 1024)])
def test_gpu_cumsum_shared(dim, reverse, inplace, shape):
    x = torch.from_numpy(_rand(shape, seed=18))
    (got,) = _gpu_check(scan_shared, scan_shared_sim,
                        lambda: [x, torch.full(shape, float("nan"))], [1], dim=dim,
                        reverse=reverse, inplace=inplace, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got.numpy(), _scan_ref(x.numpy(), dim, reverse, 16, 32),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 256), (1000, 4096)])
def test_gpu_clear_false_over_chunks(shape):
    x = torch.from_numpy(_rand(shape, seed=16))
    (got,) = _gpu_check(running_max, running_max_sim, lambda: [x, torch.zeros(shape[0], 2)],
                        [1], rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(got[:, 0].numpy(), x.numpy().max(1))
    np.testing.assert_allclose(got[:, 1].numpy(), x.double().sum(1).numpy(), rtol=1e-5,
                               atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [_xf((37, 64)), _xf((4, 1)), (1000, 2048)])
def test_gpu_subset_indexed_fragment(shape):
    x = torch.from_numpy(_rand(shape, seed=17))
    M, N = shape
    (got,) = _gpu_check(center_rows, center_rows_sim,
                        lambda: [x, torch.full((M, N + 1), float("nan"))], [1],
                        rtol=1e-5, atol=1e-5)
    xd = x.double()
    c = xd - xd.mean(1, keepdim=True)
    torch.testing.assert_close(got[:, :N].double(), c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[:, N].double(), c.abs().amax(1), rtol=1e-5, atol=1e-5)


# examples at realistic sizes against torch float64; small ones also against the simulator

@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm", [((4096, 4096), 1), ((4096, 4096), 2), ((1000, 1024), 1),
                                      ((37, 256), 4), _xf((7, 1), 4)])
def test_gpu_softmax(shape, bm):
    x = _x(shape, seed=20, device="cuda")
    y = torch.zeros_like(x)
    softmax(x, y, block_M=bm)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _softmax_ref(x), rtol=0, atol=2e-3)
    if shape[0] * shape[1] <= 64 * 1024:
        ys = torch.zeros(shape, dtype=torch.float16)
        softmax_sim(x.cpu(), ys, block_M=bm)
        torch.testing.assert_close(y.cpu(), ys, rtol=0, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm,bn", [((4096, 4096), 1, 2048), ((1000, 10000), 1, 2048),
                                         ((4096, 4096), 2, 1024), _xf((37, 1000), 2, 256),
                                         ((37, 1000), 4, 256), _xf((9, 1), 4, 64)])
def test_gpu_online_softmax(shape, bm, bn):
    x = _x(shape, seed=21, device="cuda") * 3
    y = torch.zeros_like(x)
    online_softmax(x, y, block_M=bm, block_N=bn)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _softmax_ref(x), rtol=0, atol=2e-3)
    if shape[0] * shape[1] <= 64 * 1024:
        ys = torch.zeros(shape, dtype=torch.float16)
        online_softmax_sim(x.cpu(), ys, block_M=bm, block_N=bn)
        torch.testing.assert_close(y.cpu(), ys, rtol=0, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm", [((4096, 4096), 1), ((4096, 4096), 4), ((37, 512), 4),
                                      _xf((3, 1), 2), _xf((33, 1), 64)])
def test_gpu_norms(shape, bm):
    x, w, b = (_x(shape, seed=22, device="cuda"), _x(shape[1:], seed=23, device="cuda"),
               _x(shape[1:], seed=24, device="cuda"))
    y = torch.zeros_like(x)
    layer_norm(x, w, b, y, 1e-5, block_M=bm)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _layer_norm_ref(x, w, b), rtol=0, atol=2e-2)
    small = shape[0] * shape[1] <= 64 * 1024
    if small:
        ys = torch.zeros(shape, dtype=torch.float16)
        layer_norm_sim(x.cpu(), w.cpu(), b.cpu(), ys, 1e-5, block_M=bm)
        torch.testing.assert_close(y.cpu(), ys, rtol=0, atol=1e-2)
    rms_norm(x, w, y, 1e-5, block_M=bm)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _rms_norm_ref(x, w), rtol=0, atol=2e-2)
    if small:
        ys = torch.zeros(shape, dtype=torch.float16)
        rms_norm_sim(x.cpu(), w.cpu(), ys, 1e-5, block_M=bm)
        torch.testing.assert_close(y.cpu(), ys, rtol=0, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm,bn", [((4096, 4096), 4, 1024), ((1001, 5000), 4, 1024),
                                         ((37, 5000), 4, 1024), ((1, 1), 4, 64)])
def test_gpu_row_sum(shape, bm, bn):
    x = _x(shape, seed=27, device="cuda")
    s = torch.full((shape[0],), float("nan"), device="cuda")
    row_sum(x, s, block_M=bm, block_N=bn)
    torch.cuda.synchronize()
    torch.testing.assert_close(s.double().cpu(), x.double().cpu().sum(1), rtol=1e-5, atol=1e-2)
    if shape[0] * shape[1] <= 256 * 1024:
        ss = torch.full((shape[0],), float("nan"))
        row_sum_sim(x.cpu(), ss, block_M=bm, block_N=bn)
        torch.testing.assert_close(s.cpu(), ss, rtol=1e-5, atol=1e-3)


@tilejit.kernel
def _max_and_sum_wide_block(X, S, threads: T.constexpr = 512):
    """A fragment whose layout spans fewer threads than the block (128 16-byte runs of
    a 1024-wide row, 512 threads): the other threads hold replicas."""
    M, N = X.shape
    with T.Kernel(M, threads=threads) as bx:
        x = T.alloc_fragment((1, N), T.float32)
        m = T.alloc_fragment((1,), T.float32)
        s = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], x)
        T.reduce_max(x, m, dim=1)
        T.reduce_sum(x, s, dim=1)
        for i in T.Parallel(1):
            S[bx, 0] = m[i]
            S[bx, 1] = s[i]


def test_replicas_do_not_write_reduction_partials():
    """The threads outside a fragment layout's span hold identity partials; in the PTX
    their stores to the cross-warp scratch are guarded (no warp of replicas may
    overwrite the slot of the warp it aliases)."""
    x = np.zeros((64, 1024), np.float16)
    ptx = _max_and_sum_wide_block.compile(x, np.zeros((64, 2), np.float32),
                                          target="cuda", arch="sm_90a").ptx
    stores = [i for i, line in enumerate(ptx.splitlines()) if "st.shared" in line]
    assert len(stores) == 2
    lines = ptx.splitlines()
    for i in stores:      # a branch (or a predicate) between the shuffles and the store
        shfl = max(j for j in range(i) if "shfl.sync" in lines[j])
        between = lines[shfl + 1:i + 1]
        assert any(line.startswith("$L__") or "@%p" in line for line in between), between


def test_reductions_one_after_another_share_one_scratch():
    """The max and the sum each exchange 4 warps' partials (16 bytes): one scratch tile
    of 16 bytes serves both (each reduction ends with a barrier after its reads); the
    results in the simulator, and on the GPU in the test below."""
    x = _x((64, 1024), seed=24)
    compiled = _max_and_sum_wide_block.compile(x.numpy(), np.zeros((64, 2), np.float32),
                                               target="cuda", arch="sm_90a")
    assert compiled.shared_bytes == 16
    got = torch.zeros((64, 2))
    _max_and_sum_wide_block(x, got)
    torch.testing.assert_close(got[:, 0], x.float().amax(1))
    torch.testing.assert_close(got[:, 1].double(), x.double().sum(1), rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
def test_replicas_do_not_write_reduction_partials_gpu():
    x = _x((8192, 1024), seed=23, device="cuda")
    got = torch.zeros((8192, 2), device="cuda")
    for _ in range(3):
        _max_and_sum_wide_block(x, got)
        torch.cuda.synchronize()
        torch.testing.assert_close(got[:, 0].cpu(), x.float().amax(1).cpu())
        torch.testing.assert_close(got[:, 1].double().cpu(), x.double().sum(1).cpu(),
                                   rtol=1e-5, atol=1e-3)


# widths whose 16-byte runs leave a row on a non-power-of-two number of threads (1536
# columns: 192 runs of 8 for 256 threads): the layout pass takes narrower runs

@pytest.mark.parametrize("N", [768, 1280, 1536, 1792])
def test_row_kernels_compile_for_awkward_widths(N, tmp_path):
    x = np.zeros((64, N), np.float16)
    w = np.zeros(N, np.float16)
    for kernel, args in ((softmax, (x, x)), (rms_norm, (x, w, x, 1e-5)),
                         (layer_norm, (x, w, w, x, 1e-5))):
        ptx = kernel.compile(*args, target="cuda", arch="sm_90a").ptx
        assert "shfl.sync.bfly" in ptx
        if PTXAS is not None:
            path = tmp_path / f"{kernel.__name__}.ptx"
            path.write_text(ptx)
            out = subprocess.run([PTXAS, "-arch=sm_90a", str(path), "-o", str(path) + ".o"],
                                 capture_output=True, text=True)
            assert out.returncode == 0, out.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("N", [768, 1536])
def test_gpu_row_kernels_awkward_widths(N):
    x = _x((333, N), seed=29, device="cuda")
    w = _x((N,), seed=30, device="cuda")
    b = _x((N,), seed=31, device="cuda")
    y = torch.zeros_like(x)
    softmax(x, y)
    torch.testing.assert_close(y.double().cpu(), _softmax_ref(x), rtol=0, atol=2e-3)
    layer_norm(x, w, b, y, 1e-5)
    ref = torch.nn.functional.layer_norm(x.double(), (N,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=0, atol=2e-2)


@pytest.mark.parametrize("N", [1000, 96, 200])
def test_widths_the_threads_do_not_divide(N, tmp_path):
    """A row of 1000 (or 96, 200) elements on 256 threads: spread over a power-of-two
    group of threads that divides it (8, 32, 8), rows dealt to the groups and the rest
    of the block holding replicas; it was refused ("a row of 1000 elements over 256
    threads")."""
    x = _x((64, N), seed=33)
    y = torch.zeros_like(x)
    softmax_sim(x, y)
    torch.testing.assert_close(y.double(), _softmax_ref(x), rtol=0, atol=2e-3)
    ptx = softmax.compile(x.numpy(), x.numpy(), target="cuda", arch="sm_90a").ptx
    assert "shfl.sync.bfly" in ptx
    if PTXAS is not None:
        path = tmp_path / "softmax.ptx"
        path.write_text(ptx)
        out = subprocess.run([PTXAS, "-arch=sm_90a", "-v", str(path), "-o", str(path) + ".o"],
                             capture_output=True, text=True)
        assert out.returncode == 0 and "0 bytes spill stores" in out.stderr, out.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("N", [1000, 96, 200])
def test_gpu_widths_the_threads_do_not_divide(N):
    x = _x((333, N), seed=34, device="cuda")
    y = torch.zeros_like(x)
    softmax(x, y)
    torch.testing.assert_close(y.double().cpu(), _softmax_ref(x), rtol=0, atol=2e-3)
    sim = torch.zeros_like(x).cpu()
    softmax_sim(x.cpu(), sim)
    torch.testing.assert_close(y.cpu(), sim, rtol=0, atol=1e-3)


@tilejit.kernel
def _batched_sum(X, Out, batch: T.constexpr = 2):
    M, N = X.shape
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((M, N), T.float32)
        r = T.alloc_fragment((M,), T.float32)
        T.copy(X, x)
        T.reduce_sum(x, r, dim=1, batch=batch)
        T.copy(r, Out)


def test_tilelang_batch_is_accepted_and_checked(ptxas):
    """``batch=`` (TileLang's all-reduce barrier tuning) changes nothing; it must be a
    positive integer, in simulation and when compiling."""
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    out = np.zeros(16, np.float32)
    _batched_sum(x, out, batch=4)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    ptxas(_batched_sum.compile(x, out, target="cuda", arch="sm_90a", batch=4).ptx, "sm_90a")
    for run in (lambda: _batched_sum.compile(x, out, target="cuda", arch="sm_90a", batch=0),
                lambda: _batched_sum(x, out, batch=0)):
        with pytest.raises(tilejit.CompileError, match=r"T.reduce_sum: batch must be a "
                                                       r"positive integer, got 0"):
            run()


@tilejit.kernel
def _bitwise_rows(A, B, op: T.constexpr = "bitxor"):
    M, N = A.shape
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_fragment((M, N), A.dtype)
        r = T.alloc_fragment((M,), A.dtype)
        T.copy(A, a)
        if op == "bitand":
            T.reduce_bitand(a, r, dim=1)
        elif op == "bitor":
            T.reduce_bitor(a, r, dim=1)
        else:
            T.reduce_bitxor(a, r, dim=1)
        T.copy(r, B)


_BITWISE = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def _bit_input(dtype=np.int32):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    return rng.integers(info.min, info.max, (32, 256), dtype=dtype, endpoint=True)


@pytest.mark.parametrize("op", sorted(_BITWISE))
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_bitwise_reductions_in_simulation(op, dtype):
    a = _bit_input(dtype)
    b = np.zeros(32, dtype)
    _bitwise_rows(a, b, op=op)
    np.testing.assert_array_equal(b, _BITWISE[op].reduce(a, axis=1))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", sorted(_BITWISE))
def test_bitwise_reductions_ptx(op, arch, ptxas):
    a = _bit_input()
    ptx = _bitwise_rows.compile(a, np.zeros(32, np.int32), op=op, target="cuda", arch=arch).ptx
    assert {"bitand": "and.b32", "bitor": "or.b32", "bitxor": "xor.b32"}[op] in ptx
    ptxas(ptx, arch)


def test_a_bitwise_reduction_of_floats_is_an_error():
    """A CompileError, and the ValueError TileLang's check raises (its issue 2570)."""
    a = np.zeros((32, 256), np.float32)
    with pytest.raises(ValueError, match=r"T.reduce_bitxor: a bitwise reduction requires an "
                                         r"integer or bool buffer \(integer tiles here\), "
                                         r"got a float32"):
        _bitwise_rows.compile(a, np.zeros(32, np.float32), target="cuda", arch="sm_90a")


@tilejit.kernel
def _max_rows(A, B):
    M, N = A.shape
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_fragment((M, N), A.dtype)
        r = T.alloc_fragment((M,), A.dtype)
        T.copy(A, a)
        T.reduce_max(a, r, dim=1)
        T.copy(r, B)


@pytest.mark.parametrize("kernel", [_max_rows, _bitwise_rows])
def test_a_reduction_of_bool_tiles_is_an_error(kernel):
    """A CompileError, and the RuntimeError TileLang's lowering raises (its issue 2568)."""
    a = np.zeros((32, 256), np.bool_)
    name = "max" if kernel is _max_rows else "bitxor"
    with pytest.raises(RuntimeError, match=rf"T.reduce_{name} is not supported for bool "
                                           rf"tiles, got a bool and r bool"):
        kernel.compile(a, np.zeros(32, np.bool_), target="cuda", arch="sm_90a")
    with pytest.raises(tilejit.CompileError, match="not supported for bool"):
        kernel(a, np.zeros(32, np.bool_))


@pytest.mark.gpu
@pytest.mark.parametrize("op", sorted(_BITWISE))
def test_bitwise_reductions_on_the_gpu(op):
    a = _bit_input()
    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    _bitwise_rows(torch.from_numpy(a).cuda(), out, op=op)
    np.testing.assert_array_equal(out.cpu().numpy(), _BITWISE[op].reduce(a, axis=1))


@tilejit.kernel
def row_sums_into_shared(X, Out, clear: T.constexpr = True):
    """TileLang's fragment-to-shared reduction (its test_reduce's "f2s" cases): the sums
    land in a shared tile; with clear=False they add to what it holds."""
    M, N = X.shape
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((M, N), T.float32)
        s = T.alloc_shared((M,), T.float32)
        T.copy(X, x)
        if not clear:
            for i in T.Parallel(M):
                s[i] = 1.0
        T.reduce_sum(x, s, dim=1, clear=clear)
        T.copy(s, Out)


@pytest.mark.parametrize("clear", [True, False])
def test_a_fragment_reduced_into_a_shared_tile(clear, ptxas):
    x = _x((32, 64), dtype=torch.float32, seed=31)
    out = torch.zeros(32)
    row_sums_into_shared(x, out, clear=clear)
    torch.testing.assert_close(out.double(), x.double().sum(1) + (0 if clear else 1),
                               rtol=1e-5, atol=1e-5)
    for arch in ARCHS:
        ptxas(row_sums_into_shared.compile(x.numpy(), out.numpy(), clear=clear,
                                           target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("clear", [True, False])
def test_a_fragment_reduced_into_a_shared_tile_gpu(clear):
    x = _x((32, 64), dtype=torch.float32, seed=32)
    got = torch.zeros(32, device="cuda")
    row_sums_into_shared(x.cuda(), got, clear=clear)
    sim = torch.zeros(32)
    row_sums_into_shared(x, sim, clear=clear)
    torch.testing.assert_close(got.cpu().double(), x.double().sum(1) + (0 if clear else 1),
                               rtol=1e-5, atol=1e-5)
    # float32 sums of 64 terms, added in another order on the GPU than in numpy
    torch.testing.assert_close(got.cpu(), sim, rtol=1e-5, atol=1e-5)


def _three_column_reductions():
    bM, bN, bK = 192, 128, 32

    @T.prim_func
    def main(A: T.Tensor((bM, bK), "float16"), B: T.Tensor((bK, bN), "float16"),
             S: T.Tensor((bN,), "float32"), MX: T.Tensor((bN,), "float32"),
             MN: T.Tensor((bN,), "float32")):
        with T.Kernel(1, threads=384):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            acc = T.alloc_fragment((bM, bN), "float32")
            s = T.alloc_fragment((bN,), "float32")
            mx = T.alloc_fragment((bN,), "float32")
            mn = T.alloc_fragment((bN,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.reduce_sum(acc, s, dim=0)
            T.reduce_max(acc, mx, dim=0)
            T.reduce_min(acc, mn, dim=0)
            T.copy(s, S)
            T.copy(mx, MX)
            T.copy(mn, MN)
    return tilejit.compile(main, out_idx=[2, 3, 4])


def test_reductions_through_shared_memory_share_their_scratch(ptxas):
    """Three column reductions of a 192 x 128 accumulator on 12 warps (no shuffle
    pattern: through shared memory) take one 96 KiB scratch between barriers, not three
    (315 KiB, over every GPU's limit)."""
    kernel = _three_column_reductions()
    a, b = torch.randn(192, 32).half(), torch.randn(32, 128).half()
    s, mx, mn = kernel(a, b)
    c = a.double() @ b.double()
    torch.testing.assert_close(s.double(), c.sum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(mx.double(), c.amax(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mn.double(), c.amin(0), rtol=1e-5, atol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_gpu_reductions_through_shared_memory_share_their_scratch():
    kernel = _three_column_reductions()
    a, b = torch.randn(192, 32).half(), torch.randn(32, 128).half()
    got = kernel(a.cuda(), b.cuda())
    sim = kernel(a, b)
    for g, h in zip(got, sim):
        torch.testing.assert_close(g.cpu(), h, rtol=1e-4, atol=1e-3)

"""T.cummax: the running maximum along a dimension of a shared, local or fragment tile,
in place or into another tile, forward or reversed, NaN ignored (as T.max and
T.reduce_max). In simulation against numpy (float64); PTX for sm_80 and sm_90a assembled
by ptxas; with ``-m gpu`` on the device against torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def cummax_tile(X, Y, bm: T.constexpr = 16, bn: T.constexpr = 32, dim: T.constexpr = 1,
                reverse: T.constexpr = False, where: T.constexpr = "shared",
                inplace: T.constexpr = True):
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), T.float32)
        D = T.alloc_shared((bm, bn), T.float32)
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(X[by * bm, bx * bn], S)
        if where == "fragment":
            T.copy(S, F)
            T.cummax(F, dim=dim, reverse=reverse)
            T.copy(F, Y[by * bm, bx * bn])
        elif inplace:
            T.cummax(src=S, dim=dim, reverse=reverse)
            T.copy(S, Y[by * bm, bx * bn])
        else:
            T.cummax(src=S, dst=D, dim=dim, reverse=reverse)
            T.copy(D, Y[by * bm, bx * bn])


@tilejit.kernel
def cummax_local(X, Y, reverse: T.constexpr = False):
    with T.Kernel(1, threads=32) as bx:
        L = T.alloc_local((4, 8), T.int32)
        for i in T.serial(4):
            for j in T.serial(8):
                L[i, j] = X[i, j]
        T.cummax(L, dim=1, reverse=reverse)
        for i in T.serial(4):
            for j in T.serial(8):
                Y[i, j] = L[i, j]


def _reference(x, dim, reverse, bm, bn):
    """Each (bm, bn) tile's running maximum, NaN ignored (np.fmax); edge tiles see the
    zeros T.copy reads past X."""
    M, N = x.shape
    pm, pn = -(-M // bm) * bm, -(-N // bn) * bn
    xp = np.zeros((pm, pn))
    xp[:M, :N] = x
    out = np.empty_like(xp)
    for i in range(0, pm, bm):
        for j in range(0, pn, bn):
            v = xp[i:i + bm, j:j + bn]
            if reverse:
                out[i:i + bm, j:j + bn] = np.flip(np.fmax.accumulate(np.flip(v, dim), dim), dim)
            else:
                out[i:i + bm, j:j + bn] = np.fmax.accumulate(v, dim)
    return out[:M, :N]


def _x(shape, seed, nans=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
    if nans:
        x[1::5, 3] = np.nan
    return x


@pytest.mark.parametrize("where,inplace", [("shared", True), ("shared", False),
                                           ("fragment", True)])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_in_simulation(where, inplace, dim, reverse):
    x = _x((40, 70), seed=dim + 2 * reverse, nans=True)
    y = np.full(x.shape, -1.0, np.float32)
    cummax_tile(x, y, dim=dim, reverse=reverse, where=where, inplace=inplace)
    np.testing.assert_array_equal(y, _reference(x, dim, reverse, 16, 32).astype(np.float32))


@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_of_a_local_integer_tile(reverse):
    x = np.random.default_rng(3).integers(-50, 50, (4, 8)).astype(np.int32)
    y = np.zeros((4, 8), np.int32)
    cummax_local(x, y, reverse=reverse)
    ref = np.flip(np.maximum.accumulate(np.flip(x, 1), 1), 1) if reverse else \
        np.maximum.accumulate(x, 1)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("where", ["shared", "fragment"])
def test_cummax_ptx(arch, where, ptxas):
    x = np.zeros((64, 64), np.float32)
    ptx = cummax_tile.compile(x, x.copy(), where=where, target="cuda", arch=arch).ptx
    assert "max.f32" in ptx             # llvm.maxnum: NaN ignored
    ptxas(ptx, arch)
    ptx = cummax_local.compile(np.zeros((4, 8), np.int32), np.zeros((4, 8), np.int32),
                               target="cuda", arch=arch).ptx
    assert "max.s32" in ptx
    ptxas(ptx, arch)


def test_cummax_needs_matching_shapes():
    @tilejit.kernel
    def bad(X, Y):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((8, 8), T.float32)
            D = T.alloc_shared((8, 4), T.float32)
            T.copy(X[0, 0], S)
            T.cummax(S, D, dim=1)
            T.copy(D, Y[0, 0])
    with pytest.raises(tilejit.CompileError, match=r"T\.cummax: dst D \(8, 4\) must have "
                                                   r"src's shape \(8, 8\)"):
        bad.compile(np.zeros((8, 8), np.float32), np.zeros((8, 4), np.float32),
                    target="cuda", arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("where,inplace", [("shared", False), ("fragment", True)])
@pytest.mark.parametrize("dim,reverse", [(0, False), (1, True)])
def test_cummax_gpu(where, inplace, dim, reverse):
    x = torch.from_numpy(_x((100, 70), seed=7, nans=True))
    y = torch.full(x.shape, -1.0, device="cuda")
    cummax_tile(x.cuda(), y, dim=dim, reverse=reverse, where=where, inplace=inplace)
    torch.cuda.synchronize()
    ref = _reference(x.numpy(), dim, reverse, 16, 32)
    np.testing.assert_array_equal(y.cpu().numpy(), ref.astype(np.float32))
    # the simulator gives the same elements
    ys = np.full(x.shape, -1.0, np.float32)
    tilejit.kernel(cummax_tile.func, target="sim")(x.numpy(), ys, dim=dim, reverse=reverse,
                                                   where=where, inplace=inplace)
    np.testing.assert_array_equal(y.cpu().numpy(), ys)
    # and torch.cummax where no NaN is involved (torch propagates NaN; T.cummax ignores it)
    t = x.clone()
    t[torch.isnan(t)] = -1e30
    tiles = t.new_zeros(112, 96)
    tiles[:100, :70] = t
    tiles = tiles.reshape(7, 16, 3, 32).permute(0, 2, 1, 3)
    d = 2 + dim
    ref_t = (tiles.flip(d).cummax(d).values.flip(d) if reverse else tiles.cummax(d).values)
    ref_t = ref_t.permute(0, 2, 1, 3).reshape(112, 96)[:100, :70]
    y_t = y.cpu().clone()
    y_t[torch.from_numpy(np.isnan(ref))] = -1e30
    keep = ~torch.from_numpy(np.isnan(ref))
    torch.testing.assert_close(y_t[keep], ref_t[keep], rtol=0, atol=0)

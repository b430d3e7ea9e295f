"""The larger and smaller of signed zeros, as PTX ``max``/``min`` compute them (+0 above
−0; a NaN loses): T.max, T.min, T.reduce_max/min, T.cummax, T.warp_reduce_max/min and a
float T.atomic_max/min, bit for bit. numpy's fmax/fmin return either zero (which one
depends on the dtype), so the simulator orders them itself (``language/minmax.py``).
In simulation against the rule; with ``-m gpu`` against the simulator, bit for bit."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language.minmax import FMAX, FMIN, MAXIMUM, MINIMUM

NAN = float("nan")
# pairs of operands, both orders of every zero pair
PAIRS = [(-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (-0.0, 1.0), (-1.0, -0.0),
         (NAN, -0.0), (-0.0, NAN), (0.0, -1.0), (2.0, 0.0)]


def _signs(x):
    return np.signbit(np.asarray(x, np.float64)).tolist()


def _expected(pairs, larger):
    out = []
    for a, b in pairs:
        if np.isnan(a) or np.isnan(b):
            out.append(b if np.isnan(a) else a)
        elif a == b == 0:
            both_negative = np.signbit(a) and np.signbit(b)
            both_positive = not np.signbit(a) and not np.signbit(b)
            out.append(-0.0 if (both_negative if larger else not both_positive) else 0.0)
        else:
            out.append(max(a, b) if larger else min(a, b))
    return np.array(out)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_rule_in_every_float_dtype(dtype):
    a = np.array([p[0] for p in PAIRS], dtype)
    b = np.array([p[1] for p in PAIRS], dtype)
    for fn, larger in ((FMAX, True), (FMIN, False)):
        got = fn(a, b)
        assert got.dtype == dtype
        want = _expected(PAIRS, larger)
        np.testing.assert_array_equal(got, want.astype(dtype))
        assert _signs(got) == _signs(want)
        for (x, y), w in zip(PAIRS, want):           # numpy scalars too
            one = fn(dtype(x), dtype(y))
            assert type(one) is dtype and _signs(one) == _signs(w)
    # NaN wins in MAXIMUM/MINIMUM; zeros as above
    assert np.isnan(MAXIMUM(dtype(NAN), dtype(1.0)))
    assert not np.signbit(MAXIMUM(dtype(-0.0), dtype(0.0)))
    assert np.signbit(MINIMUM(dtype(0.0), dtype(-0.0)))


def test_reductions_and_scans_order_zeros():
    v = np.array([[-0.0, -0.0, 0.0, -0.0], [-0.0, -1.0, -0.0, -0.0],
                  [0.0, 0.0, -0.0, 0.0], [NAN, -0.0, NAN, 0.0]], np.float32)
    assert _signs(FMAX.reduce(v, axis=1)) == [False, True, False, False]
    assert _signs(FMIN.reduce(v, axis=1)) == [True, True, True, True]
    np.testing.assert_array_equal(FMIN.reduce(v, axis=1), [0, -1, 0, 0])
    acc = FMAX.accumulate(v, axis=1)
    assert [_signs(r) for r in acc] == [[True, True, False, False], [True, True, True, True],
                                         [False, False, False, False],
                                         [False, True, True, False]]
    assert np.isnan(acc[3, 0])
    assert FMAX.reduce(np.array([3, -4, 9]), axis=0) == 9       # integers unchanged


@tilejit.kernel
def zeros_kernel(A, A2, B, Mx, Mn, R, C, W, At):
    """T.max/T.min of pairs, a row's reduce_max/min, its cummax, a warp's max, and a
    float atomic max into At, from the same operands."""
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((4, 8), T.float32)
        F = T.alloc_fragment((4, 8), T.float32)
        rmax = T.alloc_fragment((4,), T.float32)
        rmin = T.alloc_fragment((4,), T.float32)
        for i in T.Parallel(32):
            Mx[i] = T.max(A[i], B[i])
            Mn[i] = T.min(A[i], B[i])
        T.copy(A2, S)
        T.copy(S, F)
        T.reduce_max(F, rmax, dim=1)
        T.reduce_min(F, rmin, dim=1)
        for i in T.Parallel(4):
            R[0, i] = rmax[i]
            R[1, i] = rmin[i]
        T.cummax(S, dim=1)
        T.copy(S, C)
        for i in T.Parallel(32):
            W[i] = T.warp_reduce_max(B[i])
            T.atomic_max(At[i % 2], A[i])


def _zero_operands():
    # every row of A (as a (4, 8) tile) holds zeros only: the signs decide everything
    a = torch.tensor([-0.0, -0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0,
                      -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0,
                      0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.0, 0.0,
                      -0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0], dtype=torch.float32)
    b = torch.tensor([0.0, -0.0] * 16, dtype=torch.float32)
    return a, b


def _outputs(device):
    shapes = [(32,), (32,), (2, 4), (4, 8), (32,), (2,)]
    outs = [torch.zeros(s, dtype=torch.float32, device=device) for s in shapes]
    outs[-1].fill_(-0.0)
    return outs


def _run(target, device):
    a, b = _zero_operands()
    outs = _outputs(device)
    kernel = zeros_kernel if target is None else tilejit.kernel(zeros_kernel.func,
                                                                  target=target)
    kernel(a.to(device), a.reshape(4, 8).to(device), b.to(device), *outs)
    return [o.cpu() for o in outs]


def _bits(t):
    return t.view(torch.int32)


def test_every_max_and_min_orders_zeros_in_simulation():
    mx, mn, r, c, w, at = _run("sim", "cpu")
    a, b = _zero_operands()
    assert _signs(mx) == _signs(_expected(list(zip(a.tolist(), b.tolist())), True))
    assert _signs(mn) == _signs(_expected(list(zip(a.tolist(), b.tolist())), False))
    assert _signs(r[0]) == [False, True, False, False]       # a +0 in rows 0, 2, 3
    assert _signs(r[1]) == [True, True, True, True]          # a -0 in every row
    assert _signs(c[0]) == [True, True, False, False, False, False, False, False]
    assert _signs(c[1]) == [True] * 8
    assert _signs(w) == [False] * 32                          # +0 in the warp
    assert _signs(at) == [False, False]                       # a +0 at even and odd lanes


@pytest.mark.gpu
def test_every_max_and_min_of_zeros_matches_the_simulator_on_the_gpu():
    got = _run(None, "cuda")
    sim = _run("sim", "cpu")
    for name, g, s in zip(("max", "min", "reduce", "cummax", "warp", "atomic"), got, sim):
        assert torch.equal(_bits(g), _bits(s)), (name, _signs(g), _signs(s))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_kernel_uses_ptx_max_and_min_and_assembles(arch, ptxas):
    a, b = _zero_operands()
    args = [a.numpy(), a.reshape(4, 8).numpy(), b.numpy()] + [o.numpy() for o in
                                                                 _outputs("cpu")]
    ptx = zeros_kernel.compile(*args, target="cuda", arch=arch).ptx
    assert "max.f32" in ptx and "min.f32" in ptx
    ptxas(ptx, arch)


def test_the_atomics_in_place_form_orders_zeros_and_stays_fast():
    d = np.array([-0.0, 0.0, -0.0, 5.0, -0.0], np.float32)
    FMAX.at(d, (np.array([0, 0, 1, 2, 2, 3]),),
            np.array([-0.0, 0.0, -0.0, -0.0, -1.0, 7.0], np.float32))
    assert _signs(d) == [False, False, True, False, True] and d[3] == 7.0
    d = np.array([0.0, 0.0, -0.0], np.float32)
    FMIN.at(d, (np.array([0, 1, 1]),), np.array([-0.0, 0.0, 0.0], np.float32))
    assert _signs(d) == [True, False, True]
    many = np.random.default_rng(1).standard_normal(200_000).astype(np.float32)
    one = np.full(1, -np.inf, np.float32)
    FMAX.at(one, (np.zeros(many.size, np.int64),), many)     # numpy's at, then the signs
    assert one[0] == many.max()
    assert FMIN(np.array([False]), np.array([False])).tolist() == [False]   # booleans

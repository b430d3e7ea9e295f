"""``T.reinterpret(value, dtype)``: a value's bits as another dtype of the same width (a
bitcast), as TileLang spells it. In simulation, PTX assembled by ptxas, and with
``-m gpu`` on the device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def float_bits(X, Bits, Back, Halves, block: T.constexpr = 128):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                bits = T.reinterpret(X[j], T.uint32)
                Bits[j] = bits
                flipped = T.cast(bits ^ T.uint32(0x80000000), T.uint32)   # (Numba widens)
                Back[j] = T.reinterpret(flipped, T.float32)                  # -x
                Halves[j] = T.reinterpret(T.cast(X[j], T.float16), T.int16)


def _inputs():
    x = np.array([1.0, -2.5, 0.0, -0.0, np.inf, np.nan, 3e-39, 65504.0], np.float32)
    return np.concatenate([x, np.random.default_rng(3).standard_normal(300, np.float32)])


def _check(x, bits, back, halves):
    np.testing.assert_array_equal(bits, x.view(np.uint32))
    np.testing.assert_array_equal(back.view(np.uint32), (-x).view(np.uint32))
    want = x.astype(np.float16)
    nan = np.isnan(want)
    # a NaN's payload is the converter's: numpy keeps the quiet bit (0x7e00), the GPU's
    # cvt.rn.f16.f32 gives the canonical 0x7fff; both must be NaNs
    assert np.isnan(halves.view(np.float16)[nan]).all()
    np.testing.assert_array_equal(halves[~nan], want.view(np.int16)[~nan])


def test_in_simulation():
    x = _inputs()
    out = [np.zeros(len(x), np.uint32), np.zeros(len(x), np.float32), np.zeros(len(x), np.int16)]
    float_bits(x, *out)
    _check(x, *out)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    x = _inputs()
    ptx = float_bits.compile(x, np.zeros(len(x), np.uint32), x.copy(),
                             np.zeros(len(x), np.int16), target="cuda", arch=arch).ptx
    assert "xor.b32" in ptx and "cvt.f32.u32" not in ptx        # bits, not conversions
    ptxas(ptx, arch)


@tilejit.kernel
def widths_differ(X, Y):
    with T.Kernel(1, threads=32) as bx:
        Y[0] = T.reinterpret(X[0], T.uint16)


def test_widths_must_match():
    with pytest.raises(tilejit.CompileError, match=r"T.reinterpret: float32 as uint16: a "
                                                   r"bitcast needs integers or float16/32/64 "
                                                   r"of the same width"):
        widths_differ(np.zeros(4, np.float32), np.zeros(4, np.uint16))
    with pytest.raises(TypeError, match="the widths differ"):
        T.reinterpret(np.float32(1), T.int16)
    with pytest.raises(TypeError, match="expected a typed value"):
        T.reinterpret(1.0, T.int32)


@pytest.mark.gpu
def test_on_the_gpu():
    x = torch.from_numpy(_inputs())
    n = len(x)
    gpu = [torch.zeros(n, dtype=torch.int32, device="cuda"), torch.zeros(n, device="cuda"),
           torch.zeros(n, dtype=torch.int16, device="cuda")]
    float_bits(x.cuda(), *gpu)
    torch.cuda.synchronize()
    sim = [np.zeros(n, np.uint32), np.zeros(n, np.float32), np.zeros(n, np.int16)]
    float_bits(x.numpy(), *sim)
    _check(x.numpy(), gpu[0].cpu().numpy().view(np.uint32), gpu[1].cpu().numpy(),
           gpu[2].cpu().numpy())
    np.testing.assert_array_equal(gpu[0].cpu().numpy().view(np.uint32), sim[0])

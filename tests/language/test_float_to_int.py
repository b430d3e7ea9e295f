"""A float converted to an integer as the GPU converts it (PTX cvt.rzi): toward zero, NaN
as 0, out of range saturated (32 and 64 bits to the type's range; 8 and 16 bits through a
16-bit register, whose low bits are kept). The simulator wrapped instead (numpy's cast:
int32(1e10) was -2**31, int32(NaN) -2**31; found by a user-style fuzz); one rule for
both now. In simulation, PTX here, GPU against the simulator there."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T

VALUES = np.array([1e10, -1e10, np.nan, 300.7, -300.7, 2.5, -2.5, 65535.5, -1.0],
                  np.float32)


@tilejit.kernel
def to_ints(X, I32, I8, U8, I16):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(X.shape[0]):
            I32[i] = T.cast(X[i], "int32")
            I8[i] = T.cast(X[i], "int8")
            U8[i] = T.cast(X[i], "uint8")
            I16[i] = T.cast(X[i], "int16")


def _outputs(n, make=np.zeros):
    return [make(n, dtype) for dtype in (np.int32, np.int8, np.uint8, np.int16)]


def test_saturating_toward_zero_nan_as_zero():
    outs = _outputs(len(VALUES))
    to_ints(VALUES, *outs)
    i32, i8, u8, i16 = outs
    assert i32.tolist() == [2**31 - 1, -2**31, 0, 300, -300, 2, -2, 65535, -1]
    assert i16.tolist() == [32767, -32768, 0, 300, -300, 2, -2, 32767, -1]
    assert i8.tolist() == [-1, 0, 0, 44, -44, 2, -2, -1, -1]
    assert u8.tolist() == [255, 0, 0, 44, 0, 2, 0, 255, 0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    ptx = to_ints.compile(VALUES, *_outputs(len(VALUES)), target="cuda", arch=arch).ptx
    assert "cvt.rzi.s32.f32" in ptx and "cvt.rzi.s16.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_the_simulator():
    import torch
    sim = _outputs(len(VALUES))
    to_ints(VALUES, *sim)
    dev = [torch.zeros(len(VALUES), dtype=d, device="cuda")
           for d in (torch.int32, torch.int8, torch.uint8, torch.int16)]
    to_ints(torch.from_numpy(VALUES).cuda(), *dev)
    for d, s in zip(dev, sim):
        np.testing.assert_array_equal(d.cpu().numpy(), s)

"""float8_e8m0fnu, OCP MX's scale dtype (an exponent only: 2^(e - 127), 0xFF NaN, no
zero, no sign): float32 → e8m0 as torch converts (the exponent rounded up past half a
mantissa, at a half too but for a subnormal; the sign dropped; past 2^127 NaN) and
e8m0 → float32 exactly, in the simulator and in the NVPTX lowering (integer arithmetic,
assembled for sm_80 and sm_90a), against torch's own conversion; TileLang's
``T.float8_e8m0fnu`` and ``torch.float8_e8m0fnu`` tensors in and out."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language.dtypes import as_dtype
from tilejit.language.numerics import from_float8_bits, round_to_float8


@tilejit.kernel
def to_scales(X, S, block: T.constexpr = 256):
    """S = X as float8_e8m0fnu; X2 is S back in float32 (X's second row)."""
    with T.Kernel(T.ceildiv(X.shape[1], block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < X.shape[1]:
                S[j] = T.cast(X[0, j], T.float8_e8m0fnu)
                X[1, j] = T.cast(S[j], T.float32)


def _inputs():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    e = np.repeat(np.arange(256, dtype=np.uint32), 6) << 23
    m = np.tile(np.uint32([0, 1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF]), 256)
    x = np.concatenate([bits, e | m, (e | m) | np.uint32(0x80000000)]).view(np.float32)
    return np.stack([x, np.zeros_like(x)])


def _torch_reference(x):
    codes = torch.from_numpy(x.copy()).to(torch.float8_e8m0fnu)
    return codes, codes.float().numpy()


def _same(a, b):
    return ((a == b) | (np.isnan(a) & np.isnan(b))).all()


def test_the_rounding_is_torchs_on_every_exponent():
    x = _inputs()[0]
    _, want = _torch_reference(x)
    assert _same(round_to_float8(x, as_dtype("float8_e8m0fnu")), want)
    codes = np.arange(256, dtype=np.uint8)
    assert _same(from_float8_bits(codes, as_dtype("float8_e8m0fnu")),
                 torch.from_numpy(codes).view(torch.float8_e8m0fnu).float().numpy())


def test_the_nvptx_lowering_converts_as_torch_on_the_host():
    """The lowering's conversions (``codegen/lowering/scalar.py``) JIT-compiled for this
    CPU (test_float8.HostFloat8) against torch, every code and every exponent's halves."""
    from test_float8 import HostFloat8
    host = HostFloat8("float8_e8m0fnu")
    codes = np.arange(256, dtype=np.uint8)
    assert _same(host.decode(codes),
                 torch.from_numpy(codes).view(torch.float8_e8m0fnu).float().numpy())
    x = _inputs()[0]
    codes, _ = _torch_reference(x)
    assert np.array_equal(host.encode(x), codes.view(torch.uint8).numpy())


def test_a_kernel_writes_torch_e8m0_tensors_in_the_simulator():
    xs = _inputs()
    codes, want = _torch_reference(xs[0])
    s = torch.zeros(xs.shape[1], dtype=torch.float8_e8m0fnu)
    x = torch.from_numpy(xs.copy())
    tilejit.kernel(to_scales.func, target="sim")(x, s)
    assert torch.equal(s.view(torch.uint8), codes.view(torch.uint8))
    assert _same(x[1].numpy(), want)


def test_tilelangs_name_and_the_torch_dtype():
    assert T.float8_e8m0fnu == "float8_e8m0fnu"
    assert getattr(torch, T.float8_e8m0fnu) is torch.float8_e8m0fnu


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_assembles(ptxas, arch):
    xs = _inputs()
    ptx = to_scales.compile(torch.from_numpy(xs), torch.zeros(xs.shape[1],
                                                              dtype=torch.float8_e8m0fnu),
                            target="cuda", arch=arch).ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    xs = _inputs()
    codes, want = _torch_reference(xs[0])
    x = torch.from_numpy(xs.copy()).cuda()
    s = torch.zeros(xs.shape[1], dtype=torch.float8_e8m0fnu, device="cuda")
    to_scales(x, s)
    assert torch.equal(s.cpu().view(torch.uint8), codes.view(torch.uint8))
    assert _same(x[1].cpu().numpy(), want)

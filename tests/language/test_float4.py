"""float4_e2m1fn tensors (OCP MX's 4-bit float, TileLang's T.float4_e2m1fn): held two a
byte (element 2k in the low four bits), as uint8 / int8 bytes or torch's
float4_e2m1fn_x2; read and written one element at a time, on the GPU and in the
simulator. The codes' values and the rounding come from the format's definition here,
not from tilejit's tables."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.runtime.arguments import PackedTensor
from kernel_files import kernel_module

# e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal (m/2)
VALUES = [(-1) ** (c >> 3) * ((c & 1) / 2 if (c >> 1) & 3 == 0 else
                              (1 + (c & 1) / 2) * 2.0 ** (((c >> 1) & 3) - 1))
          for c in range(16)]


def nearest_code(x: float) -> int:
    """Round to nearest, ties to the even code, saturating at ±6; NaN → +6."""
    if np.isnan(x):
        return 7
    mag = min(abs(x), 6.0)
    best = min(range(8), key=lambda c: (abs(VALUES[c] - mag), c & 1))
    return best | (8 if np.signbit(x) else 0)


def test_the_codes_values():
    from tilejit.language.numerics import from_float4_codes
    np.testing.assert_array_equal(from_float4_codes(np.arange(16)), np.float32(VALUES))
    assert VALUES[:8] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]


SAMPLES = np.float32([0, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.1, 7, 1e30, np.inf,
                      -np.inf, np.nan, -0.0, -0.25, -2.5, -5, 1e-30, 0.7499, 2.99])


def test_rounding_in_the_simulator():
    from tilejit.language.numerics import float4_codes
    got = float4_codes(SAMPLES)
    assert list(got) == [nearest_code(float(x)) for x in SAMPLES]


def test_the_gpus_conversions_run_on_this_cpu():
    """The lowering's float32 → code and code → float32 (plain IR, JIT-compiled for the
    host) against the format's definition, over every code and a sweep of values."""
    from llvmlite import ir
    from host_math import HostRoutines
    from tilejit.codegen.lowering.scalar import _f32_to_f4, _f4_to_f32
    encode = HostRoutines({"e": _f32_to_f4}, ir.FloatType(), out_ty=ir.IntType(8))
    decode = HostRoutines({"d": _f4_to_f32}, ir.IntType(8), out_ty=ir.FloatType())
    sweep = np.concatenate([SAMPLES, np.linspace(-7, 7, 20001, dtype=np.float32)])
    assert list(encode("e", sweep)) == [nearest_code(float(x)) for x in sweep]
    np.testing.assert_array_equal(decode("d", np.arange(16, dtype=np.uint8)),
                                  np.float32(VALUES))


_module = kernel_module


@tilejit.kernel
def dequant(Q, Y, scale):
    with T.Kernel(Q.shape[0], threads=64) as bx:
        for j in T.Parallel(Q.shape[1]):
            Y[bx, j] = Q[bx, j] * scale


@tilejit.kernel
def quant(X, Q):
    """Adjacent elements (one byte) written by adjacent threads at once."""
    with T.Kernel(X.shape[0], threads=64) as bx:
        for j in T.Parallel(X.shape[1]):
            Q[bx, j] = X[bx, j]


def _codes(raw):
    return np.stack([raw & 15, raw >> 4], -1).reshape(raw.shape[:-1] + (-1,))


def test_elements_are_read_from_their_half_byte():
    raw = np.random.default_rng(0).integers(0, 256, (3, 32), dtype=np.uint8)
    y = np.zeros((3, 64), np.float32)
    tilejit.kernel(dequant.func, target="sim")(PackedTensor(raw, T.float4_e2m1fn), y, 2.0)
    np.testing.assert_array_equal(y, np.float32(VALUES)[_codes(raw)] * 2)


def test_elements_are_written_into_their_half_byte(ptxas):
    x = np.random.default_rng(1).uniform(-8, 8, (3, 64)).astype(np.float32)
    x[0, :6] = [0.25, 0.75, np.nan, -np.inf, -0.0, 2.5]
    q = np.full((3, 32), 0xAA, np.uint8)
    tilejit.kernel(quant.func, target="sim")(x, PackedTensor(q, T.float4_e2m1fn))
    expected = np.array([[nearest_code(float(v)) for v in row] for row in x], np.uint8)
    np.testing.assert_array_equal(_codes(q), expected)
    for arch in ("sm_80", "sm_90a"):
        ptx = quant.compile(x, PackedTensor(q, T.float4_e2m1fn), target="cuda", arch=arch).ptx
        assert "atom.and.b32" in ptx.replace("atom.global.and", "atom.and") and \
            "atom.or.b32" in ptx.replace("atom.global.or", "atom.or")
        ptxas(ptx, arch)


def test_torch_float4_tensors_and_tilelang_annotations(tmp_path):
    """TileLang's forms: a T.Tensor annotation of float4_e2m1fn takes uint8 bytes (shape
    and strides logical: the last extent doubled, the others' strides doubled) or torch's
    float4_e2m1fn_x2; T.empty of it gives torch's float4_e2m1fn_x2."""
    torch = pytest.importorskip("torch")
    m = _module(tmp_path, "fp4_programs", '''
import tilejit
import tilejit.language as T


@tilejit.jit
def quantize(X):
    m = T.dynamic("m")
    X: T.Tensor[(m, 64), T.float32]
    Q = T.empty((m, 64), T.float4_e2m1fn)
    with T.Kernel(m, threads=64) as bx:
        for j in T.Parallel(64):
            Q[bx, j] = X[bx, j]
    return Q


@tilejit.jit
def rows(Q):
    m = T.dynamic("m")
    s = T.dynamic("s")
    Q: T.StridedTensor[(m, 64), (s, 1), T.float4_e2m1fn]
    Y = T.empty((m, 64), T.float32)
    with T.Kernel(m, threads=64) as bx:
        for j in T.Parallel(64):
            Y[bx, j] = Q[bx, j]
    return Y
''')
    x = torch.randn(6, 64) * 3
    q = m.quantize(x)
    assert q.dtype == getattr(torch, "float4_e2m1fn_x2", torch.int8) and q.shape == (6, 32)
    expected = np.float32(VALUES)[[[nearest_code(float(v)) for v in row] for row in x.numpy()]]
    np.testing.assert_array_equal(m.rows(q).numpy(), expected)
    every_other = q.view(torch.uint8)[::2]                       # strides (64, 1) bytes
    np.testing.assert_array_equal(m.rows(every_other).numpy(), expected[::2])


def test_copies_between_a_float4_tensor_and_a_tile(tmp_path, ptxas):
    """T.copy of a float4_e2m1fn tensor (a region or a corner) to or from a whole shared
    tile or fragment is the element loop over the tile; the tensor's edges clip."""
    m = _module(tmp_path, "fp4_copies", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def via_shared(Q, Y):
    M, N = Q.shape
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        S = T.alloc_shared((16, 64), T.float32)
        T.copy(Q[bx * 16, 0], S)
        T.copy(S, Y[bx * 16, 0])


@tilejit.kernel
def via_fragment(Q, R):
    M, N = Q.shape
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        F = T.alloc_fragment((16, 64), T.float32)
        T.copy(Q[bx * 16:(bx + 1) * 16, 0:64], F)
        for i, j in T.Parallel(16, 64):
            F[i, j] = F[i, j] * 2.0
        T.copy(F, R[bx * 16, 0])
''')
    raw = np.random.default_rng(0).integers(0, 256, (40, 32), dtype=np.uint8)  # 40: clipped
    values = np.float32(VALUES)[_codes(raw)]
    y = np.zeros((40, 64), np.float32)
    tilejit.kernel(m.via_shared.func, target="sim")(PackedTensor(raw, T.float4_e2m1fn), y)
    np.testing.assert_array_equal(y, values)
    r = np.zeros((40, 32), np.uint8)
    tilejit.kernel(m.via_fragment.func, target="sim")(PackedTensor(raw, T.float4_e2m1fn),
                                                     PackedTensor(r, T.float4_e2m1fn))
    expected = np.array([[nearest_code(2 * float(v)) for v in row] for row in values])
    np.testing.assert_array_equal(_codes(r), expected)
    for arch in ("sm_80", "sm_90a"):
        ptxas(m.via_fragment.compile(PackedTensor(raw, T.float4_e2m1fn),
                                     PackedTensor(r, T.float4_e2m1fn), target="cuda",
                                     arch=arch).ptx, arch)


@pytest.mark.parametrize("body, message", [
    ("L = T.alloc_local((64,), T.float32)\n        T.copy(Q[0, 0], L)",
     r"T.copy of Q, a float4_e2m1fn tensor \(two elements a byte\), with `L`: it is copied "
     r"element by element to or from a whole shared tile or fragment only"),
    ("T.atomic_add(Q[0, 1], 1.0)",
     r"T.atomic_add: atomics support .*; the destination is float4_e2m1fn"),
])
def test_other_tile_operations_on_a_float4_tensor_are_refused(tmp_path, body, message):
    m = _module(tmp_path, "fp4_refused", f'''
import tilejit
import tilejit.language as T


@tilejit.kernel
def k(Q):
    with T.Kernel(1, threads=64):
        {body}
''')
    q = PackedTensor(np.zeros((2, 32), np.uint8), T.float4_e2m1fn)
    with pytest.raises(CompileError, match=message):
        m.k.compile(q, target="cuda", arch="sm_90a")


@pytest.mark.parametrize("storage, error, message", [
    (np.zeros((4, 8), np.uint8)[:, ::2], ValueError, r"its bytes' last dimension must be "
                                                     r"contiguous"),
    (np.zeros((4, 8), np.float32), TypeError, r"expected a uint8, int8 or "
                                              r"float4_e2m1fn_x2 tensor, got ndarray of float32"),
])
def test_bad_bytes_are_named(storage, error, message):
    with pytest.raises(error, match=message):
        tilejit.kernel(dequant.func, target="sim")(PackedTensor(storage, T.float4_e2m1fn),
                                                   np.zeros((4, 8), np.float32), 1.0)


@pytest.mark.gpu
def test_float4_tensors_on_the_gpu():
    import torch
    raw = torch.randint(0, 256, (5, 32), dtype=torch.uint8, device="cuda")
    y = torch.zeros(5, 64, device="cuda")
    dequant(PackedTensor(raw, T.float4_e2m1fn), y, 2.0)
    np.testing.assert_array_equal(y.cpu().numpy(),
                                  np.float32(VALUES)[_codes(raw.cpu().numpy())] * 2)
    x = torch.randn(5, 64, device="cuda") * 4
    q = torch.full((5, 32), 0xAA, dtype=torch.uint8, device="cuda")
    for _ in range(3):              # adjacent threads write the halves of each byte
        quant(x, PackedTensor(q, T.float4_e2m1fn))
    sim = np.full((5, 32), 0xAA, np.uint8)
    tilejit.kernel(quant.func, target="sim")(x.cpu().numpy(), PackedTensor(sim, T.float4_e2m1fn))
    np.testing.assert_array_equal(q.cpu().numpy(), sim)


def test_a_copy_through_another_name_is_refused(tmp_path):
    """An alias or view of a float4 tensor reaches T.copy's typing, which refuses it on
    both targets (its lowering moves bytes)."""
    m = _module(tmp_path, "fp4_alias", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def k(Q, Y):
    with T.Kernel(1, threads=64):
        R = Q
        S = T.alloc_shared((1, 64), T.float32)
        T.copy(R[0:1, 0:64], S)
        T.copy(S, Y)
''')
    q = PackedTensor(np.zeros((1, 32), np.uint8), T.float4_e2m1fn)
    y = np.zeros((1, 64), np.float32)
    message = r"T.copy on a float4_e2m1fn tensor \(two elements a byte\) is not supported here"
    with pytest.raises(CompileError, match=message):
        m.k.compile(q, y, target="cuda", arch="sm_90a")
    with pytest.raises(CompileError, match=message):
        tilejit.kernel(m.k.func, target="sim")(q, y)


def test_conversions_to_and_from_the_other_narrow_floats(tmp_path, ptxas):
    """float4 to bfloat16 (the MX dequantization) and float8 to float4 convert through
    float32 on both targets."""
    torch = pytest.importorskip("torch")
    m = _module(tmp_path, "fp4_narrow", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def to_bf16(Q, Y):
    with T.Kernel(1, threads=64):
        for j in T.Parallel(64):
            Y[j] = Q[0, j]


@tilejit.kernel
def from_fp8(X, Q):
    with T.Kernel(1, threads=64):
        for j in T.Parallel(64):
            Q[0, j] = X[j]
''')
    raw = np.random.default_rng(3).integers(0, 256, (1, 32), dtype=np.uint8)
    y = torch.zeros(64, dtype=torch.bfloat16)
    tilejit.kernel(m.to_bf16.func, target="sim")(PackedTensor(raw, T.float4_e2m1fn), y)
    np.testing.assert_array_equal(y.float().numpy(), np.float32(VALUES)[_codes(raw)][0])
    x = (torch.randn(64) * 3).to(torch.float8_e4m3fn)
    q = np.zeros((1, 32), np.uint8)
    tilejit.kernel(m.from_fp8.func, target="sim")(x, PackedTensor(q, T.float4_e2m1fn))
    assert list(_codes(q)[0]) == [nearest_code(float(v)) for v in x.float().numpy()]
    ptxas(m.to_bf16.compile(PackedTensor(raw, T.float4_e2m1fn), y, target="cuda",
                            arch="sm_90a").ptx, "sm_90a")
    ptxas(m.from_fp8.compile(x, PackedTensor(q, T.float4_e2m1fn), target="cuda",
                             arch="sm_90a").ptx, "sm_90a")


def test_reinterpret_to_float4_is_refused(tmp_path):
    m = _module(tmp_path, "fp4_bits", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def k(B, Y):
    with T.Kernel(1, threads=32):
        for j in T.Parallel(32):
            Y[j] = T.reinterpret(B[j], T.float4_e2m1fn)
''')
    b, y = np.zeros(32, np.uint8), np.zeros(32, np.float32)
    with pytest.raises(CompileError, match="a float4_e2m1fn value is four bits"):
        m.k.compile(b, y, target="cuda", arch="sm_90a")
    with pytest.raises(CompileError, match="a float4_e2m1fn value is four bits"):
        tilejit.kernel(m.k.func, target="sim")(b, y)


def test_constants_round_to_the_dtype_as_on_the_gpu():
    assert T.float4_e2m1fn(2.6) == 3.0 and T.float4_e2m1fn(-100) == -6.0
    assert T.infinity(T.float4_e2m1fn) == 6.0 and T.infinity(T.float8_e4m3) == 448.0
    assert T.bfloat16(1.00390625) == 1.0


def test_packed_tensors_hold_packed_dtypes_only():
    with pytest.raises(TypeError, match="PackedTensor holds a dtype of less than a byte"):
        PackedTensor(np.zeros(4, np.uint8), T.float32)


def test_the_profilers_inputs_and_compiling_from_shapes():
    torch = pytest.importorskip("torch")
    from tilejit.tilelang.utils import TensorSupplyType, supply
    for kind in (TensorSupplyType.Auto, TensorSupplyType.Zero, TensorSupplyType.Normal):
        t = supply((4, 64), T.float4_e2m1fn, kind, "cpu")
        assert t.dtype == getattr(torch, "float4_e2m1fn_x2", torch.int8) and t.shape == (4, 32)
    zero = supply((4, 64), T.float4_e2m1fn, TensorSupplyType.Zero, "cpu")
    assert not zero.view(torch.uint8).any()


def test_narrow_float_constants_are_numpy_scalars_rounded_to_their_type():
    """T.float8_e4m3fn (TileLang's spelling) rounds as T.float8_e4m3; each constant is a
    numpy float32 scalar (a 0-d array would not index or count)."""
    assert T.float8_e4m3fn(1.7) == T.float8_e4m3(1.7) == 1.75
    assert T.float8_e4m3fn(500.0) == 448.0
    for value in (T.bfloat16(3.0), T.float8_e5m2(1.1), T.float4_e2m1fn(2.6),
                  T.infinity(T.bfloat16)):
        assert isinstance(value, np.float32) and np.ndim(value) == 0


def test_device_code_reads_the_arguments_strides_in_simulation(tmp_path):
    """A tensor simulated on a copy (float4 decoded, bfloat16 in float32) reports the
    argument's strides to the kernel, as the GPU's, not the copy's (a review's finding)."""
    torch = pytest.importorskip("torch")
    m = _module(tmp_path, "fp4_strides", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def strides_of(X, B):
    with T.Kernel(1, threads=32):
        B[0] = X.strides[0]
        B[1] = X.strides[1]
''')
    b = np.zeros(2, np.int64)
    q = np.zeros((4, 48), np.uint8)[:, :32]
    tilejit.kernel(m.strides_of.func, target="sim")(PackedTensor(q, T.float4_e2m1fn), b)
    assert list(b) == [96, 1]
    x = torch.zeros(8, 48, dtype=torch.bfloat16)[:, :32]
    tilejit.kernel(m.strides_of.func, target="sim")(x, b)
    assert list(b) == [48, 1]

"""Bitwise operations and shifts on typed integers in C's types (TileLang's kernels are
C++): at least int32, a shift in its left operand's type, the bits a left shift pushes
past the type's width dropped; a shift count at or past the width gives 0 (the sign for
a signed right shift), as PTX's clamped shifts and the simulator's numpy do; the in-place
forms (``x <<= n``) alike. The simulator and the GPU agree on each."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

N = 16


def shifts(kind):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"),
             C: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                if kind == "shl":
                    C[i] = A[i] << B[i]
                elif kind == "shr":
                    C[i] = A[i] >> B[i]
                elif kind == "sign_extend":
                    C[i] = (A[i] << 28) >> 28
                else:
                    x = T.alloc_var(T.int32)
                    x = A[i]
                    x <<= 28
                    x >>= 28
                    C[i] = x
    return main


def _reference(a, b, kind):
    a, b = a.tolist(), b.tolist()

    def wrap(v):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    if kind == "shl":
        return [0 if n >= 32 else wrap(x << n) for x, n in zip(a, b)]
    if kind == "shr":
        return [x >> min(n, 31) for x, n in zip(a, b)]
    return [wrap(x << 28) >> 28 for x in a]


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-2 ** 31, 2 ** 31 - 1, (N,), generator=g, dtype=torch.int64).int()
    b = torch.tensor([0, 1, 4, 28, 31, 32, 33, 40, 63, 7, 15, 16, 30, 29, 2, 3],
                     dtype=torch.int32)
    return a.to(device), b.to(device)


KINDS = ["shl", "shr", "sign_extend", "in_place"]


@pytest.mark.parametrize("kind", KINDS)
def test_simulator_follows_c(kind, ptxas):
    kernel = tilejit.compile(shifts(kind), out_idx=[2])
    a, b = _inputs()
    assert kernel(a, b).tolist() == _reference(a, b, kind)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_gpu_follows_c_and_the_simulator(kind):
    kernel = tilejit.compile(shifts(kind), out_idx=[2])
    a, b = _inputs("cuda")
    gpu = kernel(a, b)
    assert gpu.cpu().tolist() == _reference(a.cpu(), b.cpu(), kind)
    assert torch.equal(gpu.cpu(), kernel(a.cpu(), b.cpu()))


def mixed(kind):
    """Shifts whose operands differ in type: counts of 64 bits, narrow left operands, an
    in-place shift of a local element, a boolean shifted by an int8."""
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int64"), U: T.Tensor((N,), "uint8"),
             C: T.Tensor((N,), "int64")):
        with T.Kernel(1, threads=32):
            x = T.alloc_local((1,), "uint32")
            for i in T.Parallel(N):
                if kind == "index_count":
                    C[i] = A[i] << (i + 24)
                elif kind == "wide_count":
                    C[i] = A[i] >> B[i]
                elif kind == "boolean_left":        # Numba's 64 bits (numpy's int8)
                    C[i] = (A[i] > 0) << T.cast(U[i] % 8, "int8")
                else:
                    C[i] = U[i] << 8
            if kind == "local_in_place":
                for k in T.serial(N):
                    x[0] = T.cast(A[k], "uint32")
                    x[0] >>= B[k]
                    C[k] = x[0]
    return main


def _mixed_reference(a, b, u, kind):
    def wrap32(v):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    a, b, u = a.tolist(), b.tolist(), u.tolist()
    if kind == "index_count":
        return [0 if i + 24 >= 32 else wrap32(x << (i + 24)) for i, x in enumerate(a)]
    if kind == "wide_count":
        return [x >> min(n, 31) if n >= 0 else (-1 if x < 0 else 0) for x, n in zip(a, b)]
    if kind == "narrow":
        return [v << 8 for v in u]
    if kind == "boolean_left":
        return [int(x > 0) << (v % 8) for x, v in zip(a, u)]
    return [0 if n >= 32 or n < 0 else (x & 0xFFFFFFFF) >> n for x, n in zip(a, b)]


def _mixed_inputs(device="cpu"):
    g = torch.Generator().manual_seed(11)
    a = torch.randint(-2 ** 31, 2 ** 31 - 1, (N,), generator=g, dtype=torch.int64).int()
    b = torch.tensor([2 ** 32 + 1, 2 ** 40, 3, 31, 32, 2 ** 32, 0, 5, 63, 64, 1, 2, 30, 33,
                      7, 2 ** 33 + 2])
    u = torch.randint(0, 256, (N,), generator=g, dtype=torch.int64).to(torch.uint8)
    return a.to(device), b.to(device), u.to(device)


MIXED = ["index_count", "wide_count", "narrow", "local_in_place", "boolean_left"]


@pytest.mark.parametrize("kind", MIXED)
def test_mixed_operands_follow_c_in_the_simulator(kind, ptxas):
    kernel = tilejit.compile(mixed(kind), out_idx=[3])
    a, b, u = _mixed_inputs()
    assert kernel(a, b, u).tolist() == _mixed_reference(a, b, u, kind)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", MIXED)
def test_gpu_mixed_operands_match_the_simulator(kind):
    kernel = tilejit.compile(mixed(kind), out_idx=[3])
    a, b, u = _mixed_inputs("cuda")
    gpu = kernel(a, b, u).cpu()
    assert gpu.tolist() == _mixed_reference(a.cpu(), b.cpu(), u.cpu(), kind)
    assert torch.equal(gpu, kernel(a.cpu(), b.cpu(), u.cpu()))


@pytest.mark.parametrize("op, a, b, want", [
    ("lshift", "int32", "int32", "int32"),
    ("lshift", "uint8", "int64", "int32"),      # a shift: the left operand's type, promoted
    ("rshift", "int32", "int64", "int32"),
    ("ilshift", "int32", "int32", "int32"),     # x <<= n
    ("and_", "uint8", "uint8", "int32"),
    ("or_", "int32", "uint32", "int64"),        # mixed signedness: Numba's (numpy's) widening
    ("and_", "int64", "int64", "int64"),        # 64 bits: Numba's own
    ("lshift", "int64", "int32", "int64"),
])
def test_the_typing_of_bitwise_operations(op, a, b, want):
    """What the GPU computes in, checked without one (the simulator computes with numpy:
    the GPU twins above compare the two)."""
    import operator
    from numba.core import types
    # the compiler's own context: a second one would take the registrations that
    # helpers add as kernels compile (each registry is loaded by one context)
    from tilejit.codegen.numba_target import descriptor
    ctx = descriptor.typing_context
    fn = ctx.resolve_value_type(getattr(operator, op))
    sig = ctx.resolve_function_type(fn, (getattr(types, a), getattr(types, b)), {})
    assert str(sig.return_type) == want


def masks(kind):
    """``& | ^`` with a literal that does not fit the narrow operand (numpy raises
    OverflowError for ``uint8 & 0x1FF``; C computes in int32), a narrow result feeding
    arithmetic past its width, and the in-place form on a local element."""
    @T.prim_func
    def main(U: T.Tensor((N,), "uint8"), S: T.Tensor((N,), "int8"),
             C: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32):
            x = T.alloc_local((1,), "int32")
            for i in T.Parallel(N):
                if kind == "wide_literal":
                    C[i] = U[i] & 0x1F0
                elif kind == "narrow_then_add":
                    C[i] = (U[i] ^ 0xFF) + 0x100
                elif kind == "signed_or":
                    C[i] = S[i] | 0x100
            if kind == "in_place":
                for k in T.serial(N):
                    x[0] = T.cast(U[k], "int32")
                    x[0] ^= 0x3C3
                    x[0] |= S[k] & 0x400
                    C[k] = x[0]
    return main


def _mask_reference(u, s, kind):
    u, s = u.tolist(), s.tolist()
    if kind == "wide_literal":
        return [v & 0x1F0 for v in u]
    if kind == "narrow_then_add":
        return [(v ^ 0xFF) + 0x100 for v in u]
    if kind == "signed_or":
        return [v | 0x100 for v in s]
    return [(v ^ 0x3C3) | (w & 0x400) for v, w in zip(u, s)]


def _mask_inputs(device="cpu"):
    g = torch.Generator().manual_seed(5)
    u = torch.randint(0, 256, (N,), generator=g, dtype=torch.int64).to(torch.uint8)
    s = torch.randint(-128, 128, (N,), generator=g, dtype=torch.int64).to(torch.int8)
    return u.to(device), s.to(device)


MASKS = ["wide_literal", "narrow_then_add", "signed_or", "in_place"]


@pytest.mark.parametrize("kind", MASKS)
def test_masks_follow_c_in_the_simulator(kind, ptxas):
    kernel = tilejit.compile(masks(kind), out_idx=[2])
    u, s = _mask_inputs()
    assert kernel(u, s).tolist() == _mask_reference(u, s, kind)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", MASKS)
def test_gpu_masks_match_the_simulator(kind):
    kernel = tilejit.compile(masks(kind), out_idx=[2])
    u, s = _mask_inputs("cuda")
    gpu = kernel(u, s).cpu()
    assert gpu.tolist() == _mask_reference(u.cpu(), s.cpu(), kind)
    assert torch.equal(gpu, kernel(u.cpu(), s.cpu()))


_DTYPES = ["boolean", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
           "uint64"]
_LITERALS = [3, 0x1F0, -16, 0xFFFFFFFF, 2 ** 40, 2 ** 63 + 5]


def _gpu_type(a, b):
    """The result type of ``a & b`` in the compiler's typing (Numba types)."""
    import operator
    from tilejit.codegen.numba_target import descriptor
    ctx = descriptor.typing_context
    fn = ctx.resolve_value_type(operator.and_)
    ty = ctx.resolve_function_type(fn, (a, b), {}).return_type
    return "bool" if str(ty) == "boolean" else str(ty)


@pytest.mark.parametrize("a", _DTYPES)
def test_the_simulators_bitwise_types_are_the_gpus(a):
    """Every pair of integer or boolean operand types, and each with a literal that fits
    the other's type or does not, gives the simulator's ``&``, ``|``, ``^`` the type the
    compiler's typing gives the GPU's."""
    import numpy as np
    from numba.core import types

    from tilejit.sim.runtime import bitwise

    def array(name):
        return np.array([5], dtype=np.bool_ if name == "boolean" else name)
    for b in _DTYPES:
        if a == b == "boolean":
            continue
        want = _gpu_type(getattr(types, a), getattr(types, b))
        for op in ("and", "or", "xor"):
            assert str(bitwise(array(a), array(b), op).dtype) == want, (a, b, op)
    for v in _LITERALS:
        want = _gpu_type(getattr(types, a), types.literal(v))
        assert str(bitwise(array(a), v, "and").dtype) == want, (a, v)
        assert str(bitwise(v, array(a), "or").dtype) == want, (v, a)


def test_the_simulators_bitwise_values():
    import numpy as np

    from tilejit.sim.runtime import bitwise
    # (operands, op, the value in the GPU's type)
    cases = [(np.uint8(3), 0x1FF, "and", 3),
             (np.int8(-3), 0x100, "or", -3),
             (np.uint8(3), np.uint8(5), "xor", 6),
             (np.int32(-1), 0xFFFFFFFF, "and", 0xFFFFFFFF),      # int64: does not fit int32
             (np.uint64(0x1234), ~0xF, "and", 0x1230),           # int64, where numpy raises
             (np.int32(-2), np.uint64(1), "or", -1),             # int64, where numpy raises
             (np.uint8(0), np.uint32(2), "and", 0)]              # uint64, not numpy's uint32
    for a, b, op, value in cases:
        assert int(bitwise(a, b, op)) == value, (a, b, op)
    with np.errstate(over="ignore"):      # the GPU's uint64 wraps below zero
        assert bitwise(np.uint8(0), np.uint32(2), "and") - np.uint64(1) == 2 ** 64 - 1
    mask = bitwise(np.array([True, False]), np.array([True, True]), "and")
    assert mask.dtype == np.bool_ and mask.tolist() == [True, False]
    assert bitwise(6, 3, "xor") == 5 and bitwise(True, False, "or") is True


@tilejit.kernel
def _float_shift(X, Y, Z, op: T.constexpr = ">>"):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            if op == ">>":
                Z[i] = X[i] >> Y[i]
            else:
                Z[i] = X[i] & 1.5


@pytest.mark.parametrize("op, text", [(">>", "`>>` of uint8 and float32"),
                                      ("&", "`&` of uint8 and a float constant")])
def test_a_bitwise_operation_on_a_float_is_a_clear_error(op, text):
    """Not Numba's list of integer signatures (the integer was computed in the float's
    type first): the operator and the operands' types, and what to write."""
    args = (np.zeros(8, np.uint8), np.zeros(8, np.float32), np.zeros(8, np.float32))
    with pytest.raises(tilejit.CompileError, match="take integers") as info:
        _float_shift(*args, op=op)
    assert text in str(info.value) and "No implementation" not in str(info.value)

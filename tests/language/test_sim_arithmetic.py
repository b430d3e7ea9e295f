"""The simulator's ``+``, ``-``, ``*`` on integers compute in the GPU's types (Numba's
rule, as the compiler's typing gives it: 64 bits, unsigned only where every operand is
unsigned, a boolean counting as unsigned; but C's wrapping uint32 for integers of at most
32 bits among which a uint32, as TileLang's C++), not numpy's: ``int8 + int8`` is int64 on the
GPU, where numpy wraps in int8 (100 + 100 = -56) and raises OverflowError for
``int8 + 300``. A loop or block index is an int64 variable there, a constant a literal."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

N = 64

_DTYPES = ["boolean", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
           "uint64"]
_LITERALS = [3, 300, -16, 0xFFFFFFFF, 2 ** 40, 2 ** 63 + 5]
_OPS = {"add": "add", "sub": "sub", "mul": "mul"}


def _gpu_type(op, a, b):
    """The result type of ``a op b`` in the compiler's typing (Numba types)."""
    import operator
    # the compiler's own context (a second one would miss the registrations of helpers)
    from tilejit.codegen.numba_target import descriptor
    ctx = descriptor.typing_context
    fn = ctx.resolve_value_type(getattr(operator, op))
    return str(ctx.resolve_function_type(fn, (a, b), {}).return_type)


@pytest.mark.parametrize("a", _DTYPES)
def test_the_simulators_arithmetic_types_are_the_gpus(a):
    """Every pair of integer or boolean operand types, and each with a literal (small,
    past the narrow types, negative, past 32 bits, past int64), gives the simulator's
    ``+``, ``-``, ``*`` the type the compiler's typing gives the GPU's."""
    from numba.core import types

    from tilejit.sim.runtime import arith

    def array(name):
        return np.array([5], dtype=np.bool_ if name == "boolean" else name)
    for op in _OPS:
        for b in _DTYPES:
            want = _gpu_type(op, getattr(types, a), getattr(types, b))
            assert str(arith(array(a), array(b), op).dtype) == want, (a, b, op)
        for v in _LITERALS:
            want = _gpu_type(op, getattr(types, a), types.literal(v))
            assert str(arith(array(a), v, op).dtype) == want, (a, v, op)
            assert str(arith(v, array(a), op).dtype) == want, (v, a, op)


def test_python_numbers_and_floats_keep_their_own_arithmetic():
    from tilejit.sim.runtime import arith
    assert arith(3, 4, "mul") == 12 and type(arith(3, 4, "mul")) is int
    assert arith(2.5, 2, "add") == 4.5
    assert arith(np.float16(1.5), np.float16(2), "mul").dtype == np.float16
    assert arith(np.array([1.5], np.float32), 2, "sub").dtype == np.float32


def widening(kind):
    """Integer arithmetic past the operands' width: the GPU computes it in 64 bits."""
    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8"),
             U: T.Tensor((N,), "uint8"), C: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                if kind == "mean":
                    C[i] = (A[i] + B[i]) // 2
                elif kind == "product":
                    C[i] = A[i] * B[i]
                elif kind == "unsigned_difference":
                    C[i] = U[i] - 200
                elif kind == "wide_literal":
                    C[i] = A[i] + 300
                # a literal the unsigned operand's type cannot hold: int64 (numpy
                # raised OverflowError); T.max/T.min as the typing's _common
                elif kind == "negative_floordiv":
                    C[i] = U[i] // -3
                elif kind == "negative_mod":
                    C[i] = U[i] % -3
                elif kind == "negative_max":
                    C[i] = T.max(-4, U[i]) + T.min(U[i], -1)
                elif kind == "uint64_shift":       # uint64 >> int32, which numpy refuses
                    C[i] = T.cast((U[i] + 1) >> (B[i] & 7), "int32")
    return main


def _reference(a, b, u, kind):
    a, b, u = a.tolist(), b.tolist(), u.tolist()
    if kind == "mean":
        return [(x + y) // 2 for x, y in zip(a, b)]
    if kind == "product":
        return [x * y for x, y in zip(a, b)]
    if kind == "unsigned_difference":
        return [v - 200 for v in u]       # int64 on the GPU (a literal is int64)
    if kind == "negative_floordiv":
        return [v // -3 for v in u]
    if kind == "negative_mod":
        return [v % -3 for v in u]
    if kind == "negative_max":
        return [v - 1 for v in u]
    if kind == "uint64_shift":
        return [(v + 1) >> (y & 7) for v, y in zip(u, b)]
    return [x + 300 for x in a]


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(11)
    a = torch.randint(-128, 128, (N,), generator=g, dtype=torch.int64).to(torch.int8)
    b = torch.randint(-128, 128, (N,), generator=g, dtype=torch.int64).to(torch.int8)
    u = torch.randint(0, 256, (N,), generator=g, dtype=torch.int64).to(torch.uint8)
    a[:4] = torch.tensor([100, -128, 127, -100], dtype=torch.int8)
    b[:4] = torch.tensor([100, -128, 127, 90], dtype=torch.int8)
    return a.to(device), b.to(device), u.to(device)


KINDS = ["mean", "product", "unsigned_difference", "wide_literal", "negative_floordiv",
         "negative_mod", "negative_max", "uint64_shift"]


@pytest.mark.parametrize("kind", KINDS)
def test_integer_arithmetic_widens_in_the_simulator(kind, ptxas):
    kernel = tilejit.compile(widening(kind), out_idx=[3])
    a, b, u = _inputs()
    assert kernel(a, b, u).tolist() == _reference(a, b, u, kind)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_gpu_integer_arithmetic_matches_the_simulator(kind):
    kernel = tilejit.compile(widening(kind), out_idx=[3])
    a, b, u = _inputs("cuda")
    gpu = kernel(a, b, u).cpu()
    assert gpu.tolist() == _reference(a.cpu(), b.cpu(), u.cpu(), kind)
    assert torch.equal(gpu, kernel(a.cpu(), b.cpu(), u.cpu()))


B = 7      # a closure's constant: a literal on the GPU


def variables_and_literals(kind):
    """A loop or block index is an int64 variable on the GPU: ``U[i] - i`` is int64 (the
    difference may be negative); a closure's constant is a literal that takes the
    unsigned operand's type: ``U[i] - B`` is uint32 and wraps, as C's."""
    @T.prim_func
    def main(U: T.Tensor((N,), "uint32"), C: T.Tensor((N,), "float64")):
        with T.Kernel(1, threads=32):
            if kind == "parallel_index":
                for i in T.Parallel(N):
                    C[i] = U[i] - i
            elif kind == "serial_index":
                for k in T.serial(N):
                    C[k] = U[k] - k
            elif kind == "serial_in_parallel":    # the simulator's per-lane form
                for i in T.Parallel(N):
                    acc = T.alloc_var("float64")
                    acc = 0.0
                    for r in T.serial(i % 2 + 1):
                        acc = U[i] - i + r * 0
                    C[i] = acc
            elif kind == "closure_literal":
                for i in T.Parallel(N):
                    C[i] = U[i] - B
            elif kind == "nested_literal":          # folded at typing: still a literal
                for i in T.Parallel(N):
                    C[i] = U[i] - (B * 1)
            elif kind == "local_constant":          # bound once, to a literal
                j = 7
                for i in T.Parallel(N):
                    C[i] = U[i] - j
    return main


def _variable_reference(u, kind):
    u = u.tolist()
    if kind in ("closure_literal", "nested_literal", "local_constant"):
        return [float((v - B) % 2 ** 32) for v in u]
    return [float(v - i) for i, v in enumerate(u)]


VARIABLE_KINDS = ["parallel_index", "serial_index", "serial_in_parallel", "closure_literal",
                  "nested_literal", "local_constant"]


def _small_unsigned(device="cpu"):
    return torch.arange(N, dtype=torch.int64).remainder(5).to(torch.uint32).to(device)


@pytest.mark.parametrize("kind", VARIABLE_KINDS)
def test_indices_are_variables_and_closure_constants_literals(kind, ptxas):
    kernel = tilejit.compile(variables_and_literals(kind), out_idx=[1])
    u = _small_unsigned()
    assert kernel(u).tolist() == _variable_reference(u, kind)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", VARIABLE_KINDS)
def test_gpu_indices_and_literals_match_the_simulator(kind):
    kernel = tilejit.compile(variables_and_literals(kind), out_idx=[1])
    u = _small_unsigned("cuda")
    gpu = kernel(u).cpu()
    assert gpu.tolist() == _variable_reference(u.cpu(), kind)
    assert torch.equal(gpu, kernel(u.cpu()))


@tilejit.kernel
def constexpr_and_shift(U, S, C, D, k: T.constexpr = 7):
    """A constexpr parameter is a literal (``U[i] - k`` is uint32 on the GPU); a loop
    index on the left of a shift an int64 variable (``(j + 100) << S[j]`` in 64 bits)."""
    n = U.shape[0]
    with T.Kernel(1, threads=32):
        for i in T.Parallel(n):
            C[i] = U[i] - k
        for j in T.serial(n):
            D[j] = (j + 100) << S[j]


def test_constexpr_parameters_are_literals_and_shifted_indices_64_bits(ptxas):
    u = _small_unsigned()
    s = torch.arange(N, dtype=torch.int64).remainder(40).to(torch.int8)
    c = torch.zeros(N, dtype=torch.float64)
    d = torch.zeros(N, dtype=torch.int64)
    tilejit.kernel(constexpr_and_shift.func, target="sim")(u, s, c, d)
    assert c.tolist() == [float((v - 7) % 2 ** 32) for v in u.tolist()]
    assert d.tolist() == [(j + 100) << int(w) for j, w in enumerate(s.tolist())]
    ptx = constexpr_and_shift.compile(u.numpy(), s.numpy(), c.numpy(), d.numpy(),
                                      target="cuda", arch="sm_90a").ptx
    assert "cvt.rn.f64.u32" in ptx and "shl.b64" in ptx
    ptxas(ptx, "sm_90a")


@tilejit.kernel
def half_with_a_literal(X, Y, Z, W):
    """A Python float meeting a float16 value is a float16 (x * 0.1 multiplies by
    float16(0.1), as TileLang's FloatImm of the half's dtype does); the compiled code
    multiplied by the float32 0.1 (a user-style fuzz: 35% of products one ulp off the
    simulator's)."""
    with T.Kernel(1, threads=128):
        for i in T.Parallel(X.shape[0]):
            Y[i] = X[i] * 0.1
            Z[i] = X[i] + 0.3
            W[i] = 0.7 - X[i]


def _half_literal_reference(x):
    def h(v):
        return torch.tensor(v).half().float()
    xf = x.float()
    return (xf * h(0.1)).half(), (xf + h(0.3)).half(), (h(0.7) - xf).half()


def test_a_literal_meeting_a_float16_is_a_float16(ptxas):
    x = torch.randn(4096).half()
    outs = [torch.zeros(4096).half() for _ in range(3)]
    half_with_a_literal(x, *outs)
    for got, want in zip(outs, _half_literal_reference(x)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    ptx = half_with_a_literal.compile(x, *outs, target="cuda", arch="sm_90a").ptx
    assert "0f3DCCCCCD" not in ptx            # the float32 0.1
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_a_literal_meeting_a_float16_on_the_gpu():
    x = torch.randn(4096).half()
    outs = [torch.zeros(4096, device="cuda").half() for _ in range(3)]
    half_with_a_literal(x.cuda(), *outs)
    for got, want in zip(outs, _half_literal_reference(x)):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def _uint32_case():
    """``+ - *`` of uint32 values (with unsigned literals) wrap in 32 bits before a shift
    or a division reads them (a hash's arithmetic), on both targets alike; with a signed
    operand (an int32 here) Numba's 64 bits stay."""
    @T.prim_func
    def main(X: T.Tensor((4,), "uint32"), Y: T.Tensor((4,), "uint32"),
             Z: T.Tensor((4,), "int32"), H: T.Tensor((4, 4), "uint32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                H[0, i] = (X[i] * Y[i]) >> 16
                H[1, i] = (X[i] + Y[i]) // 2
                H[2, i] = (X[i] - Y[i]) >> 3
                H[3, i] = (X[i] * Z[i] + 7) >> 5
    x = np.array([0x9E3779B1, 0x3C6EF362, 0xDAA66D13, 0x78DDE6C4], dtype=np.uint32)
    y = np.full(4, 0xFFFFFFF0, dtype=np.uint32)
    z = np.array([-3, 5, -70000, 123456], dtype=np.int32)
    with np.errstate(over="ignore"):
        want = np.stack([(x * y) >> 16, (x + y) // 2, (x - y) >> 3,
                         ((x.astype(np.int64) * z + 7) >> 5).astype(np.uint32)])
    as_u32 = lambda v: torch.from_numpy(v.view(np.int32).copy()).to(torch.uint32)  # noqa
    return tilejit.compile(main, out_idx=[3]), (as_u32(x), as_u32(y), torch.from_numpy(z)), want


def test_uint32_arithmetic_wraps_as_cs(ptxas):
    kernel, args, want = _uint32_case()
    assert np.array_equal(kernel(*args).numpy().view(np.uint32), want)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


@pytest.mark.gpu
def test_gpu_uint32_arithmetic_wraps_as_cs():
    kernel, args, want = _uint32_case()
    got = kernel(*(a.cuda() for a in args)).cpu()
    assert np.array_equal(got.numpy().view(np.uint32), want)

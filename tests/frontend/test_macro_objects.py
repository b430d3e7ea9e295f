"""What TileLang's macros take because they are expanded while the kernel is built:
an object of the user's as an argument, read as compile-time constants
(``frontend/object_arguments.py``: DeepSeek TileKernels' ``get_sf_and_inv(amax,
out_config, dtype)`` on a frozen dataclass), and early returns under ``if``s in a macro
that must be inlined (``frontend/tail_returns.py``: the same macro returns early for
one scale format, and holds a ``T.alloc_var``)."""
import types
from dataclasses import dataclass

import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


@dataclass(frozen=True)
class Format:
    scale: float = 2.0
    bias: bool = True
    round_pow2: bool = False


@T.macro
def scaled(v, fmt: Format):
    if fmt.bias:
        return v * fmt.scale + 1.0
    return v * fmt.scale


@T.macro
def pow2_or_scaled(v, fmt):
    """Passes the object on to another macro; returns early for one format, holding a
    T.alloc_var as TileKernels' get_sf_and_inv does."""
    s = T.alloc_var(T.float32)
    if fmt.round_pow2:
        s = T.exp2(T.ceil(T.log2(T.abs(v) + 1.0)))
        return s
    s = scaled(v, fmt=fmt)
    return s


@T.macro
def clipped(v, limit):
    """An early return on a run-time condition, with a T.alloc_var."""
    r = T.alloc_var(T.float32)
    r = v
    if v > limit:
        r = limit
        return r
    if v < -limit:
        return -limit
    return r * 1.0


@T.macro
def store_clipped(B, i, v, limit):
    """A call statement (its value unused) whose body returns early."""
    if v > limit:
        B[i] = limit
        return
    B[i] = v


def test_a_statement_call_with_an_early_return_is_inlined(ptxas):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                store_clipped(B, i, A[i], 1.0)
    a, b = torch.randn(64) * 2, torch.zeros(64)
    tilelang.compile(main)(a, b)
    torch.testing.assert_close(b, a.clamp(max=1.0))
    ptxas(tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source(), "sm_90a")


def program(n, fmt, limit=3.0):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"),
             C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(n):
                B[i] = pow2_or_scaled(A[i], fmt)
                C[i] = clipped(A[i], limit)
    return main


def _expected(a, fmt, limit=3.0):
    a64 = a.double()
    if fmt.round_pow2:
        b = torch.exp2(torch.ceil(torch.log2(a64.abs() + 1.0)))
    else:
        b = a64 * fmt.scale + (1.0 if fmt.bias else 0.0)
    return b, a64.clamp(-limit, limit)


FORMATS = [Format(), Format(3.0, False), Format(round_pow2=True),
           types.SimpleNamespace(scale=0.5, bias=True, round_pow2=False)]


@pytest.mark.parametrize("fmt", FORMATS, ids=["dataclass", "no_bias", "pow2", "namespace"])
def test_in_the_simulator_against_float64(fmt):
    a = torch.linspace(-6, 6, 256)
    b, c = torch.zeros(256), torch.zeros(256)
    tilejit.compile(program(256, fmt))(a, b, c)
    want_b, want_c = _expected(a, fmt)
    torch.testing.assert_close(b.double(), want_b, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(c.double(), want_c)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for fmt in FORMATS[:3]:
        ptx = tilejit.compile(program(256, fmt), target=f"cuda -arch={arch}") \
            .get_kernel_source()
        assert "st.global" in ptx
        ptxas(ptx, arch)


def test_each_object_gets_its_own_copy_of_the_macro():
    """Two formats in one kernel: two specializations, each with its constants."""
    f1, f2 = Format(2.0, True), Format(-1.0, False)

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = scaled(A[i], f1) + scaled(A[i], fmt=f2)
    a, b = torch.randn(64), torch.zeros(64)
    tilelang.compile(main)(a, b)
    torch.testing.assert_close(b, a * 2 + 1 - a)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS, ids=["dataclass", "no_bias", "pow2", "namespace"])
def test_on_the_gpu_against_float64_and_the_simulator(fmt):
    a = torch.linspace(-6, 6, 256)
    kernel = tilejit.compile(program(256, fmt))
    b, c = torch.zeros(256, device="cuda"), torch.zeros(256, device="cuda")
    kernel(a.cuda(), b, c)
    want_b, want_c = _expected(a, fmt)
    torch.testing.assert_close(b.cpu().double(), want_b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.cpu().double(), want_c)
    sb, sc = torch.zeros(256), torch.zeros(256)
    kernel(a, sb, sc)
    assert np.allclose(b.cpu().numpy(), sb.numpy(), rtol=1e-6, atol=1e-6)
    assert torch.equal(c.cpu(), sc)


# -- a macro with keyword-only parameters (RWKV-7's GEMV macros: `def _impl(bx, x, *, out)`)
def scaling_macro(n):
    @T.macro
    def scale(bx, x: T.Tensor((n,), "float32"), *, out: T.Tensor((n,), "float32"),
              factor=2.0):
        acc = T.alloc_fragment((32,), "float32")
        for i in T.Parallel(32):
            acc[i] = x[bx * 32 + i] * factor
        T.copy(acc, out[bx * 32:bx * 32 + 32])
    return scale


def keyword_only_program(n, factor=None):
    scale = scaling_macro(n)

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), out: T.Tensor((n,), "float32")):
        with T.Kernel(n // 32, threads=32) as bx:
            if factor is None:
                scale(bx, x, out=out)
            else:
                scale(bx, x, factor=factor, out=out)
    return main


@pytest.mark.parametrize("factor", [None, 3.0])
def test_a_macro_with_keyword_only_parameters_is_inlined(factor, ptxas):
    x = torch.randn(64)
    out = tilelang.compile(keyword_only_program(64, factor), out_idx=[1])(x)
    torch.testing.assert_close(out, x * (2.0 if factor is None else factor))
    ptxas(tilelang.compile(keyword_only_program(64, factor), out_idx=[1],
                           target="cuda -arch=sm_90a").get_kernel_source(), "sm_90a")


def test_a_keyword_only_parameter_given_by_position_is_an_error():
    scale = scaling_macro(64)

    @T.prim_func
    def main(x: T.Tensor((64,), "float32"), out: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            scale(bx, x, out)
    with pytest.raises(tilejit.CompileError, match=r"scale\(\), called here: it takes 2 "
                                                   r"positional argument\(s\), got 3"):
        tilelang.compile(main, out_idx=[1])(torch.randn(64))


@pytest.mark.gpu
def test_a_macro_with_keyword_only_parameters_on_the_gpu():
    x = torch.randn(64)
    kernel = tilelang.compile(keyword_only_program(64), out_idx=[1])
    out = kernel(x.cuda()).cpu()
    torch.testing.assert_close(out, x * 2)
    assert torch.equal(out, kernel(x))

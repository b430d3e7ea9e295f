"""A T.alloc_var keeps its dtype, as in TileLang: ``v = x`` and ``v += x`` store into it
converted (a float32 value into a float16 variable rounds to float16). In simulation
against numpy, PTX assembled by ptxas, and with ``-m gpu`` on the device."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def through_half(A, B, C, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                v = T.alloc_var(T.float16)
                v = A[j]                    # rounds to float16
                B[j] = v
                s = T.alloc_var(T.int32, 0)
                s += A[j] * 10.0            # truncates to int32 at each store
                C[j] = s


def _reference(a):
    return a.astype(np.float16).astype(np.float32), (a * 10.0).astype(np.int32)


def test_in_simulation():
    a = (np.random.default_rng(0).standard_normal(300) * 3).astype(np.float32)
    b, c = np.zeros_like(a), np.zeros(300, np.int32)
    through_half(a, b, c)
    want_b, want_c = _reference(a)
    np.testing.assert_array_equal(b, want_b)
    assert (b != a).any()                   # the rounding happened
    np.testing.assert_array_equal(c, want_c)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros(300, np.float32)
    ptx = through_half.compile(a, a.copy(), np.zeros(300, np.int32), target="cuda",
                               arch=arch).ptx
    assert "cvt.rn.f16.f32" in ptx and "cvt.rzi.s32.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu():
    a = torch.randn(1000, device="cuda") * 3
    b = torch.zeros(1000, device="cuda")
    c = torch.zeros(1000, dtype=torch.int32, device="cuda")
    through_half(a, b, c)
    torch.cuda.synchronize()
    want_b, want_c = _reference(a.cpu().numpy())
    np.testing.assert_array_equal(b.cpu().numpy(), want_b)
    np.testing.assert_array_equal(c.cpu().numpy(), want_c)


@pytest.mark.parametrize("dtype, init, message", [
    ("float32", "1e300", r"T.alloc_var\(float32, init=1e\+300\): 1e\+300 exceeds maximum of "
                         r"float32 \(3.4028234663852886e\+38\)"),
    ("float16", "-70000.0", r"70000.0 exceeds maximum of float16 \(65504.0\)"),
    ("int8", "200", r"200 is outside int8's range \[-128, 127\]"),
    ("int32", "2.5", r"an integer dtype takes a whole number, got 2.5"),
])
def test_an_initializer_its_dtype_cannot_hold_is_an_error_when_the_program_is_defined(
        tmp_path, dtype, init, message):
    """TileLang raises a ValueError as the program is defined; tilejit's is also a
    CompileError at the line (a float32 infinity or a wrapped integer otherwise)."""
    import importlib.util
    path = tmp_path / "init_kernel.py"
    path.write_text(
        "import tilejit.language as T\n\n\n"
        "@T.prim_func\n"
        f"def kernel(A: T.Tensor((1,), '{dtype}')):\n"
        "    with T.Kernel(1):\n"
        f"        value = T.alloc_var(T.{dtype}, init={init})\n"
        "        A[0] = value\n")
    spec = importlib.util.spec_from_file_location("init_kernel", path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(ValueError, match=message) as info:
        spec.loader.exec_module(module)
    assert isinstance(info.value, tilejit.CompileError) and "line 7" in str(info.value)


def test_representable_initializers_and_infinities_are_kept():
    @T.prim_func
    def kernel(A: T.Tensor((3,), "float32")):
        with T.Kernel(1):
            a = T.alloc_var(T.float32, init=3.4e38)
            b = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            c = T.alloc_var(T.int8, init=-128)
            A[0] = a
            A[1] = b
            A[2] = c
    out = np.zeros(3, np.float32)
    tilejit.compile(kernel, target="sim")(out)
    assert out[0] == np.float32(3.4e38) and out[1] == -np.inf and out[2] == -128


def _all_forms():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            a = T.alloc_var(T.float32, "local.var")
            b = T.alloc_var(T.float32, 2.0, "local.var")
            c = T.alloc_var(T.float32, scope="local.var", init=3.0)
            d = T.alloc_var(T.float32, "local.var", init=4.0)
            e = T.alloc_var(T.int8, 5)
            for i in T.Parallel(64):
                C[i] = A[i] + a + b + c + d + e
    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tilelangs_forms_of_init_and_scope(arch, ptxas):
    """``alloc_var(dtype, scope)``, ``(dtype, init, scope)``, ``init=``/``scope=``."""
    a = torch.randn(64)
    torch.testing.assert_close(tilejit.compile(_all_forms(), out_idx=[1])(a), a + 14)
    ptxas(tilejit.compile(_all_forms(), out_idx=[1], target="cuda").get_kernel_source(
        arch=arch), arch)


@pytest.mark.parametrize("call, message", [
    ("T.alloc_var(T.float32, 1.0, 'shared')", r"T.alloc_var: scope 'shared': a variable is "
                                               r"each thread's register"),
    ("T.alloc_var(T.float32, 1.0, init=2.0)", r"T.alloc_var: init given twice")])
def test_a_scope_other_than_local_var_or_a_second_init_is_an_error(call, message, tmp_path):
    import importlib.util
    path = tmp_path / "scope_kernel.py"
    path.write_text("import tilejit.language as T\n\n\n@T.prim_func\n"
                    "def kernel(A: T.Tensor((1,), 'float32')):\n    with T.Kernel(1):\n"
                    f"        v = {call}\n        A[0] = v\n")
    spec = importlib.util.spec_from_file_location("scope_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(tilejit.CompileError, match=message) as info:
        tilejit.compile(module.kernel, target="sim")(np.zeros(1, np.float32))
    assert "line 7" in str(info.value)


def test_a_bitwise_reducer_of_floats_is_an_error_when_defined(tmp_path):
    """TileLang asserts that bitand/bitor/bitxor reducers hold integers as the program is
    defined; tilejit's is also a CompileError at the line."""
    import importlib.util
    path = tmp_path / "reducer_kernel.py"
    path.write_text(
        "import tilejit.language as T\n\n\n"
        "@T.prim_func\n"
        "def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):\n"
        "    with T.Kernel(1, threads=32):\n"
        "        acc = T.alloc_reducer((1,), T.float32, op='bitand')\n"
        "        T.reducer_init(acc)\n")
    spec = importlib.util.spec_from_file_location("reducer_kernel", path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(AssertionError, match=r"T.alloc_reducer: op 'bitand' is bitwise and "
                                             r"needs an integer dtype, got float32") as info:
        spec.loader.exec_module(module)
    assert isinstance(info.value, tilejit.CompileError) and "line 7" in str(info.value)

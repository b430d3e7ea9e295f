"""A helper made by a factory the kernel calls, ``make()(args)``: TileLang's dequantizing
GEMMs pick their ``@T.macro`` so. The factory runs once, when the kernel is defined; the
helper it returns is inlined (tile operations) or compiled (scalar code) as any other,
and what it was made with keys the disk cache."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.runtime.disk_cache import function_fingerprint
from kernel_files import kernel_module


def program(M=64, N=64, block=32, scale=2.0, offset=1.0):
    def make_loader():
        @T.macro
        def load_tile(A, S, bx):            # tile operations: inlined into the kernel
            T.copy(A[bx * block, 0], S)
        return load_tile

    def make_scaler(factor=scale):          # the factory's own default, from the program
        @T.macro
        def scale_tile(S, D):
            for i, j in T.Parallel(block, N):
                D[i, j] = S[i, j] * factor
        return scale_tile

    def make_shift(by):
        def shift(x):                       # scalar code: a device function
            return x + by
        return shift

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // block, threads=128) as bx:
            S = T.alloc_shared((block, N), "float32")
            D = T.alloc_shared((block, N), "float32")
            make_loader()(A, S, bx)
            make_scaler()(S, D)
            for i, j in T.Parallel(block, N):
                B[bx * block + i, j] = make_shift(offset)(D[i, j])
    return main


@pytest.mark.parametrize("scale, offset", [(2.0, 1.0), (-3.0, 0.5)])
def test_factory_made_helpers_run_in_simulation(scale, offset):
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    b = np.zeros_like(a)
    tilejit.compile(program(scale=scale, offset=offset), target="sim")(a, b)
    np.testing.assert_allclose(b, a * np.float32(scale) + np.float32(offset), rtol=1e-6)


def test_what_a_factory_was_made_with_keys_the_cache(ptxas):
    """Two programs whose factories differ only in a default argument's value compile to
    two kernels (the default is not read by the factory's code, so it is keyed apart)."""
    ptx = {s: tilejit.compile(program(scale=s), target="cuda -arch=sm_90a").get_kernel_source()
           for s in (3.0, 5.0)}
    assert "0f40400000" in ptx[3.0].lower() and "0f40a00000" in ptx[5.0].lower()
    ptxas(ptx[3.0], "sm_90a")
    f3, f5 = (program(scale=s).func for s in (3.0, 5.0))
    assert function_fingerprint(f3) != function_fingerprint(f5)


def _bad(tmp_path, factory_body, call):
    return kernel_module(
        tmp_path, "factory_kernel", "import tilejit\nimport tilejit.language as T\n\n\n"
        f"def make(n=1):\n{factory_body}\n\n\n"
        "@tilejit.kernel\ndef k(A):\n    with T.Kernel(1, threads=32) as bx:\n"
        f"        for i in T.Parallel(32):\n            {call}\n").k


@pytest.mark.parametrize("factory_body, call, message", [
    ("    raise ValueError('no such variant')", "A[i] = make()(A[i])",
     r"make\(\.\.\.\), run to make the function the kernel calls, raised ValueError: no "
     r"such variant"),
    ("    return 3", "A[i] = make()(A[i])", r"Invalid use of Literal\[int\]\(3\)"),
])
def test_bad_factories_are_compile_errors_at_the_call(tmp_path, factory_body, call, message):
    """A factory that raises, or gives what is not a helper, is left as written (the
    kernel's module still imports): the compiler's error, at the call, on both targets."""
    k = _bad(tmp_path, factory_body, call)
    a = np.zeros(32, np.float32)
    with pytest.raises(CompileError, match=message) as info:
        k.compile(a, target="cuda", arch="sm_90a")
    assert str(info.value).rstrip().endswith(call)
    with pytest.raises(CompileError, match=message):
        tilejit.kernel(k.func, target="sim")(a)


def test_a_factorys_argument_rebound_before_the_first_compile_is_refused(tmp_path):
    """The helper is made when the kernel is defined; an argument bound to another value
    before the kernel first compiles would leave the helper with the old one (and the
    disk cache keyed by the new one): a CompileError at the call."""
    module = kernel_module(
        tmp_path, "rebound", "import tilejit\nimport tilejit.language as T\n\nS = 2.0\n\n\n"
        "def make(by):\n    def shift(x):\n        return x + by\n    return shift\n\n\n"
        "@tilejit.kernel\ndef k(A):\n    with T.Kernel(1, threads=32) as bx:\n"
        "        for i in T.Parallel(32):\n            A[i] = make(S)(A[i]) + S\n")
    module.S = 10.0
    with pytest.raises(CompileError, match=r"`make\(S\)` made the helper the kernel calls "
                                           r"here when the kernel was defined"):
        module.k.compile(np.zeros(32, np.float32), target="cuda", arch="sm_90a")


@tilejit.kernel
def constexpr_factory(A, by: T.constexpr = 3.0):
    """A factory's argument that is a constexpr: not known at definition, left as
    written (compiled as a scalar helper's call, as before)."""
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            A[i] = _shifter(by)(A[i])


def _shifter(by):
    def shift(x):
        return x + by
    return shift


def test_a_factory_of_constexpr_arguments_is_left_to_the_compiler():
    a = np.zeros(32, np.float32)
    tilejit.kernel(constexpr_factory.func, target="sim")(a, by=4.0)
    np.testing.assert_array_equal(a, np.full(32, 4.0, np.float32))


@pytest.mark.gpu
def test_factory_made_helpers_on_the_gpu():
    import torch
    a = torch.randn(64, 64, device="cuda")
    b = torch.zeros_like(a)
    tilejit.compile(program(scale=-3.0, offset=0.5), target="cuda")(a, b)
    ref = a.double() * -3.0 + 0.5
    torch.testing.assert_close(b.double(), ref, rtol=1e-6, atol=1e-6)
    sim = np.zeros((64, 64), np.float32)
    tilejit.compile(program(scale=-3.0, offset=0.5), target="sim")(a.cpu().numpy(), sim)
    np.testing.assert_array_equal(b.cpu().numpy(), sim)


def test_a_default_the_key_cannot_digest_keeps_the_function_keyed():
    """Default values are keyed leniently: one of a class the cache cannot digest (a
    lock, a device object) stands for its type instead of making kernels uncached."""
    import threading

    def helper(x, guard=threading.Lock(), n=3):
        return x * n
    function_fingerprint(helper, strict=True)           # no Unkeyable


def test_different_defaults_key_apart():
    def a(x, n=3):
        return x * n

    def b(x, n=4):
        return x * n
    b.__qualname__ = a.__qualname__
    assert function_fingerprint(a) != function_fingerprint(b)

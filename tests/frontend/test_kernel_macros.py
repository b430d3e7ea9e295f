"""A kernel whose ``with T.Kernel`` block is in a ``@T.macro`` or plain helper it calls
(TileLang programs compose kernels so: ``frontend/kernel_macros.py``): the helper's body
stands in for the call, its parameters renamed to the call's arguments. In simulation,
PTX assembled by ptxas, and with ``-m gpu`` on the device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

BLOCK = 64


@T.macro
def scaled_copy(A, B, scale=2.0):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, BLOCK), T.ceildiv(N, BLOCK), threads=128) as (bx, by):
        for i, j in T.Parallel(BLOCK, BLOCK):
            if bx * BLOCK + i < M and by * BLOCK + j < N:
                B[bx * BLOCK + i, by * BLOCK + j] = A[bx * BLOCK + i, by * BLOCK + j] * scale


def through(X, Y):                      # a plain helper that calls the macro
    scaled_copy(X, Y, scale=3.0)


@tilejit.kernel
def doubled(A, B):
    scaled_copy(A, B)


@tilejit.kernel
def tripled(A, B):
    through(A, B)


def test_the_macro_holds_the_launch():
    a = np.random.default_rng(0).standard_normal((100, 130)).astype(np.float32)
    b = np.zeros_like(a)
    doubled(a, b)
    np.testing.assert_array_equal(b, a * 2)
    tripled(a, b)
    np.testing.assert_array_equal(b, a * 3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros((100, 130), np.float32)
    for kernel in (doubled, tripled):
        ptxas(kernel.compile(a, a.copy(), target="cuda", arch=arch).ptx, arch)


@T.macro
def negated(A):
    M, N = A.shape
    assert M % 2 == 0, f"M must be even, got {M}"      # host code: checked on the host
    B = T.empty((M, N), A.dtype)
    with T.Kernel(M, threads=32) as bx:
        for j in T.serial(N):
            B[bx, j] = -A[bx, j]
    return B


@tilejit.kernel
def negate(A):
    return negated(A)


def test_the_macro_returns_the_kernels_output_and_asserts_on_the_host():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(negate(a), -a)
    with pytest.raises(AssertionError, match="M must be even, got 3"):
        negate(np.zeros((3, 3), np.float32))
    ptx = negate.compile(a, target="cuda", arch="sm_90a").ptx
    assert "neg.f32" in ptx


@T.macro
def assigns_a_parameter(A, B):
    A = B
    with T.Kernel(1, threads=32) as bx:
        A[bx] = 1.0


def _closure_macro():
    hidden = 4.0

    @T.macro
    def uses_hidden(A):
        with T.Kernel(1, threads=32) as bx:
            A[bx] = hidden
    return uses_hidden


uses_hidden = _closure_macro()


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


def test_a_macro_that_assigns_its_parameter_binds_its_own_name():
    """``A = B`` in the macro rebinds the macro's own A, as Python's (and TileLang's
    builder's) parameters are: the launch writes B."""
    @tilejit.kernel
    def assign(A, B):
        assigns_a_parameter(A, B)
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    assign(a, b)
    assert a.tolist() == [0, 0, 0, 0] and b.tolist() == [1, 0, 0, 0]


def test_what_cannot_be_inlined_is_an_error_at_the_call():
    """Raised when the kernel is defined, at the call's line."""
    with pytest.raises(tilejit.CompileError, match=r"unsupported in a kernel: lambda") as e:
        @tilejit.kernel
        def bad_argument(A, B):
            scaled_copy(A, B, (lambda: 2.0)())
    assert f"line {_line('            scaled_copy(A, B, (lambda: 2.0)())')}" in str(e.value)


def test_an_argument_computed_at_the_call():
    """An expression is evaluated once where the call is, as Python does (TileLang's
    macros are called with index expressions)."""
    @tilejit.kernel
    def computed(A, B, s: T.constexpr = 1.5):
        scaled_copy(A, B, s * 2.0 + 1.0)
    a = np.random.default_rng(0).standard_normal((40, 70)).astype(np.float32)
    b = np.zeros_like(a)
    computed(a, b)
    np.testing.assert_allclose(b, a * 4.0, rtol=1e-6)
    computed.compile(a, b, target="cuda", arch="sm_90a")


def test_a_macro_reads_its_own_closure_where_the_kernel_does_not_see_it():
    # a macro made in a factory reads the factory's values (`hidden`), which the kernel
    # neither names nor sees; a name the kernel has for something else stays the kernel's
    hidden = -1.0                                                    # noqa: F841

    @tilejit.kernel
    def reads_hidden(A):
        uses_hidden(A)
    a = np.zeros(4, np.float32)
    reads_hidden(a)
    assert a[0] == 4.0
    ptx = reads_hidden.compile(np.zeros(4, np.float32), target="cuda", arch="sm_90a").ptx
    four = np.float32(4.0).view(np.uint32)                            # 4.0, not -1.0
    assert f"0f{four:08X}" in ptx or f"{four};" in ptx


def _tile_macro_factory(block, scale):
    """TileLang's idiom: a macro closing over the factory's parameters that the kernel's
    own body never names."""
    @T.macro
    def load_scaled(A, S, bx):
        T.copy(A[bx * block], S)
        for i in T.Parallel(block):
            S[i] = S[i] * scale

    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            load_scaled(A, S, bx)
            T.copy(S, B[bx * 64])
    return main


@pytest.mark.parametrize("scale", [3.0, 5.0])
def test_a_tile_macro_reads_its_factorys_values(scale, ptxas):
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    tilejit.compile(_tile_macro_factory(64, scale))(a, b)
    np.testing.assert_array_equal(b, a * scale)
    kernel = tilejit.compile(_tile_macro_factory(64, scale), target="cuda")
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.kernel.compile(a, b, target="cuda", arch=arch).ptx
        assert f"0f{np.float32(scale).view(np.uint32):08X}" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_a_tile_macro_reads_its_factorys_values_on_the_gpu():
    a = torch.arange(256, dtype=torch.float32)
    for scale in (3.0, 5.0):
        b = torch.zeros(256, device="cuda")
        tilejit.compile(_tile_macro_factory(64, scale))(a.cuda(), b)
        torch.cuda.synchronize()
        assert torch.equal(b.cpu(), a * scale)


@pytest.mark.gpu
def test_on_the_gpu():
    a = torch.randn(100, 130)
    for kernel, scale in ((doubled, 2), (tripled, 3)):
        b = torch.zeros(100, 130, device="cuda")
        kernel(a.cuda(), b)
        torch.cuda.synchronize()
        sim = torch.zeros(100, 130)
        kernel(a, sim)
        assert torch.equal(b.cpu(), sim) and torch.equal(sim, a * scale)
    out = negate(a[:4].cuda())
    assert out.is_cuda and torch.equal(out.cpu(), -a[:4])
    with pytest.raises(AssertionError, match="M must be even"):
        negate(a[:3].cuda())


# -- two macros, each a kernel, called in turn (TileLang's split-and-combine decoders) --
def _split_and_combine(n=256):
    @T.macro
    def split(A: T.Tensor([n], "float32"), Partial: T.Tensor([2, n // 2], "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(n // 2):
                Partial[bx, i] = A[bx * (n // 2) + i] * 2.0

    @T.macro
    def combine(Partial: T.Tensor([2, n // 2], "float32"), B: T.Tensor([n // 2], "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n // 2):
                B[i] = Partial[0, i] + Partial[1, i]

    @T.prim_func
    def main(A: T.Tensor([n], "float32"), Partial: T.Tensor([2, n // 2], "float32"),
             B: T.Tensor([n // 2], "float32")):
        split(A, Partial)
        combine(Partial, B)
    return main


def test_two_macros_each_a_kernel_are_launched_in_turn():
    import tilejit as tilelang
    a = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    kernel = tilelang.compile(_split_and_combine(), out_idx=[2], target="sim")
    b = kernel(a, np.zeros((2, 128), np.float32))
    np.testing.assert_allclose(b, (a[:128] + a[128:]) * 2.0, rtol=1e-6)
    source = tilelang.compile(_split_and_combine(), out_idx=[2]).get_kernel_source(
        arch="sm_90a")
    assert source.count(".entry") == 2


@pytest.mark.gpu
def test_two_macros_each_a_kernel_on_the_gpu():
    import torch
    import tilejit as tilelang
    a = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    kernel = tilelang.compile(_split_and_combine(), out_idx=[2])
    b = kernel(torch.from_numpy(a).cuda(), torch.zeros(2, 128, device="cuda"))
    np.testing.assert_allclose(b.cpu().numpy(), (a[:128] + a[128:]) * 2.0, rtol=1e-6)


@T.macro
def doubled_with_a_layout(A, B, M, N):
    """TileOPs' decode combine: a layout lambda over (i, j) beside a loop over i, j in a
    macro (the lambda's parameters are its own, not the inlined body's names)."""
    with T.Kernel(1, threads=128):
        acc = T.alloc_fragment((M, N), "float32")
        T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i)})
        T.copy(A, acc)
        for i, j in T.Parallel(M, N):
            acc[i, j] = acc[i, j] * 2
        T.copy(acc, B)


def macro_with_a_layout_lambda(M=16, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        doubled_with_a_layout(A, B, M, N)
    return main


def test_a_layout_lambda_in_a_macro_keeps_its_parameters(ptxas):
    a = torch.randn(16, 64)
    torch.testing.assert_close(tilejit.compile(macro_with_a_layout_lambda(), out_idx=[1])(a),
                               a * 2)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(macro_with_a_layout_lambda(), out_idx=[1],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_a_layout_lambda_in_a_macro_on_the_gpu():
    a = torch.randn(16, 64, device="cuda")
    torch.testing.assert_close(tilejit.compile(macro_with_a_layout_lambda(), out_idx=[1])(a),
                               a * 2)


# -- a launching macro a factory makes from the program's shape symbol (RWKV-7's layer
# norm: `ln_macro(LEN, C, DTYPE)(x, weight, bias, out=out)` with `LEN = T.dynamic("LEN")`)
def rows_macro(LEN, C):
    @T.macro
    def launch(x: T.Tensor((LEN, C), "float32"), *, out: T.Tensor((LEN, C), "float32")):
        with T.Kernel(LEN, threads=32) as n:
            for i in T.Parallel(C):
                out[n, i] = x[n, i] * 2.0 + n
    return launch


@tilejit.jit(out_idx=[1])
def rows_program(C):
    LEN = T.dynamic("LEN")

    @T.prim_func
    def main(x: T.Tensor((LEN, C), "float32"), out: T.Tensor((LEN, C), "float32")):
        rows_macro(LEN, C)(x, out=out)
    return main


@pytest.mark.parametrize("rows", [3, 7])
def test_a_launching_macro_made_from_a_shape_symbol(rows, ptxas):
    x = torch.randn(rows, 64)
    out = rows_program(64)(x)
    torch.testing.assert_close(out, x * 2 + torch.arange(rows, dtype=torch.float32)[:, None])
    ptx = rows_program(64).get_kernel_source(arch="sm_90a")
    assert "st.global" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_a_launching_macro_made_from_a_shape_symbol_on_the_gpu():
    x = torch.randn(5, 64)
    out = rows_program(64)(x.cuda()).cpu()
    torch.testing.assert_close(out, x * 2 + torch.arange(5, dtype=torch.float32)[:, None])


# -- two macros of one name, each reading its own factory's closure (RWKV-7's GEMV
# factories each return an `_impl` that calls its own `main`)
def scaler(factor):
    main = factor * 2.0

    @T.macro
    def _impl(x, out, i):
        acc = T.alloc_fragment((32,), "float32")
        for j in T.Parallel(32):
            acc[j] = x[i, j] * main
        T.copy(acc, out[i, :])
    return _impl


def two_scalers():
    first, second = scaler(1.0), scaler(3.0)

    @T.prim_func
    def main(x: T.Tensor((2, 32), "float32"), out: T.Tensor((2, 32), "float32")):
        with T.Kernel(1, threads=32) as bx:
            first(x, out, 0)
            second(x, out, 1)
    return main


def test_two_macros_of_one_name_each_read_their_own_closure(ptxas):
    x = torch.randn(2, 32)
    out = torch.zeros(2, 32)
    tilejit.compile(two_scalers())(x, out)
    torch.testing.assert_close(out, x * torch.tensor([[2.0], [6.0]]))
    ptxas(tilejit.compile(two_scalers(), target="cuda -arch=sm_90a").get_kernel_source(),
          "sm_90a")


@pytest.mark.gpu
def test_two_macros_of_one_name_on_the_gpu():
    x = torch.randn(2, 32)
    out = torch.zeros(2, 32, device="cuda")
    tilejit.compile(two_scalers())(x.cuda(), out)
    torch.testing.assert_close(out.cpu(), x * torch.tensor([[2.0], [6.0]]))


# an emitter object whose __call__ holds the launch (a graph compiler's lowering rule
# builds one per operation and calls it in the prim_func's body), with a local import
@T.macro
def _row_scale(source, out, rows, width, factor, threads, dtype):
    with T.Kernel(rows, threads=threads) as row:
        lane = T.get_thread_binding()
        for chunk in T.serial(T.ceildiv(width, threads)):
            col = chunk * threads + lane
            if col < width:
                out[row, col] = T.cast(T.cast(source[row, col], "float32") * factor, dtype)


class _ScaleEmitter:
    def __init__(self, shape, factor, threads, dtype):
        self.shape, self.factor, self.threads, self.dtype = shape, factor, threads, dtype

    def __call__(self, operands):
        import math

        _row_scale(*operands, math.prod(self.shape[:-1]), self.shape[-1], self.factor,
                   self.threads, self.dtype)


_EMITTER_SHAPE = (6, 200)
_emitter = _ScaleEmitter(_EMITTER_SHAPE, 1.5, 64, "float16")


@T.prim_func
def emitted(x: T.Tensor(_EMITTER_SHAPE, "float16"), y: T.Tensor(_EMITTER_SHAPE, "float16")):
    _emitter((x, y))


def test_an_emitter_object_that_holds_the_launch():
    x = torch.randn(_EMITTER_SHAPE).half()
    y = torch.zeros_like(x)
    tilejit.compile(emitted, target="sim")(x, y)
    torch.testing.assert_close(y, (x.float() * 1.5).half(), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_emitter_objects_ptx(arch, ptxas):
    ptxas(tilejit.compile(emitted).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_an_emitter_object_on_the_gpu():
    x = torch.randn(_EMITTER_SHAPE).half()
    y, want = torch.zeros_like(x).cuda(), torch.zeros_like(x)
    tilejit.compile(emitted)(x.cuda(), y)
    tilejit.compile(emitted, target="sim")(x, want)
    torch.testing.assert_close(y.cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(want, (x.float() * 1.5).half(), rtol=0, atol=0)


class _RelativeImporter:
    def __call__(self, a):
        from . import nothing   # noqa: F401
        scaled_copy(a, a)


_relative = _RelativeImporter()


def test_a_helpers_relative_import_is_an_error_at_the_call():
    @T.prim_func
    def bad(a: T.Tensor((8, 8), "float32")):
        _relative(a)
    with pytest.raises(tilejit.CompileError, match="names its module absolutely"):
        tilejit.compile(bad, target="sim")(torch.zeros(8, 8))


class _Floor:
    def __call__(self, A, i):
        from math import floor as f
        A[i] = f(2.5)


class _Ceil:
    def __call__(self, A, i):
        from math import ceil as f
        A[i] = f(2.5)


_floor, _ceil = _Floor(), _Ceil()


def test_two_methods_importing_one_name_each_get_their_own():
    @T.prim_func
    def both(A: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=1):
            _floor(A, 0)
            _ceil(A, 1)
    a = torch.zeros(2)
    tilejit.compile(both, target="sim")(a)
    torch.testing.assert_close(a, torch.tensor([2.0, 3.0]))

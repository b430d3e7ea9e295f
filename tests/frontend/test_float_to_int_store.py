"""Issue 23: a typed float stored into an integer element (a global tensor's, a shared,
fragment or local tile's) is a CompileError naming the target, its dtype and the value's
dtype, and saying to convert with T.cast, in the simulator and on the CUDA path alike;
never a silent truncation. T.cast converts (toward zero) in both; a weak Python float (a
literal, a run-time Python float, a float constexpr) converts as T.cast would; bool/int
into floats, narrowing int stores and tile-level conversions (T.copy) stay allowed."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


def _message(target, what, dtype, value_dtype):
    article = "an" if dtype[0] in "aeio" else "a"      # "a uint8"
    return (f"cannot store a {value_dtype} value into {target!r}, {article} {dtype} {what}: "
            f"a float is not converted to an integer implicitly; write "
            f'T.cast(value, "{dtype}") to convert it (toward zero)')


def _both_raise(kernel, args, marker, message):
    """The simulator and a CUDA compile (no GPU needed) raise the same CompileError,
    located at the line holding ``marker``."""
    line = _line(marker)
    for run in (lambda: kernel(*args),
                lambda: kernel.compile(*args, target="cuda", arch="sm_90a")):
        with pytest.raises(CompileError) as info:
            run()
        err = info.value
        assert err.bare_message == message
        assert (err.filename, err.lineno) == (__file__, line)
        assert str(err) == (f'{message}\n  File "{__file__}", line {line}\n    '
                            f'{open(__file__).read().splitlines()[line - 1].strip()}')


# -- the issue's kernel ------------------------------------------------------------------

@tilejit.kernel
def vadd(A, B, C, block: T.constexpr = 1024):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = A[idx] + B[idx]        # float32 into int32


def test_the_issue_kernel_raises_in_the_simulator_and_for_cuda():
    a = np.full(1000, 1.7, np.float32)
    b = np.ones(1000, np.float32)
    c = np.zeros(1000, np.int32)
    message = ("cannot store a float32 value into 'C', an int32 tensor: a float is not "
               "converted to an integer implicitly; write T.cast(value, \"int32\") to "
               "convert it (toward zero)")
    assert _message("C", "tensor", "int32", "float32") == message
    _both_raise(vadd, (a, b, c), "# float32 into int32", message)
    assert not c.any()                  # nothing ran


@tilejit.kernel
def vadd_cast(A, B, C, block: T.constexpr = 1024):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = T.cast(A[idx] + B[idx], "int32")


def test_t_cast_converts_toward_zero(ptxas):
    a = np.concatenate([np.full(500, 1.7, np.float32), np.full(500, -3.7, np.float32)])
    b = np.ones(1000, np.float32)
    c = np.zeros(1000, np.int32)
    vadd_cast(a, b, c)
    np.testing.assert_array_equal(c[:500], 2)       # 2.7 -> 2
    np.testing.assert_array_equal(c[500:], -2)      # -2.7 -> -2
    ptx = vadd_cast.compile(a, b, c, target="cuda", arch="sm_90a").ptx
    assert "cvt.rzi.s32.f32" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_t_cast_on_the_gpu():
    a = torch.full((1000,), -3.7, device="cuda")
    b = torch.ones(1000, device="cuda")
    c = torch.zeros(1000, dtype=torch.int32, device="cuda")
    vadd_cast(a, b, c)
    torch.cuda.synchronize()
    assert (c == -2).all()


# -- value dtypes and integer targets --------------------------------------------------------

@tilejit.kernel
def store(A, C):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(64):
            C[i] = A[i]                         # store A into C


@pytest.mark.parametrize("src, dst", [
    ("float16", "int32"), ("float64", "int64"), ("bfloat16", "int32"), ("float32", "uint8"),
    ("float32", "int8"), ("float8_e4m3", "int16")])
def test_every_typed_float_into_every_integer(src, dst):
    a = torch.zeros(64, dtype=T.dtype(src).as_torch())
    c = torch.zeros(64, dtype=T.dtype(dst).as_torch())
    _both_raise(store, (a, c), "# store A into C", _message("C", "tensor", dst, src))


@pytest.mark.parametrize("src, dst", [
    ("int32", "float32"), ("bool", "float16"), ("int32", "int8"), ("int64", "uint8"),
    ("float32", "float16"), ("float64", "bfloat16"), ("bool", "int32")])
def test_stores_that_stay_allowed(src, dst):
    a = torch.arange(64).to(T.dtype(src).as_torch())
    c = torch.zeros(64, dtype=T.dtype(dst).as_torch())
    store(a, c)
    torch.testing.assert_close(c, a.to(c.dtype))
    store.compile(a, c, target="cuda", arch="sm_90a")


@tilejit.kernel
def accumulate(A, C):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(64):
            C[i] += A[i]                        # C[i] + A[i] is float32


@tilejit.kernel
def scaled_index(C):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(64):
            C[i] = i * 0.5                      # a typed int and a weak float: float32


@tilejit.kernel
def constant_index(A, C):
    with T.Kernel(1, threads=128) as bx:
        C[0] = A[1]                             # a constant index, outside T.Parallel


def test_arithmetic_that_makes_a_typed_float():
    a = np.zeros(64, np.float32)
    c = np.zeros(64, np.int32)
    message = _message("C", "tensor", "int32", "float32")
    _both_raise(accumulate, (a, c), "# C[i] + A[i] is float32", message)
    _both_raise(scaled_index, (c,), "# a typed int and a weak float", message)
    _both_raise(constant_index, (a, c), "# a constant index, outside", message)


# -- weak Python floats: converted as T.cast would --------------------------------------------

@tilejit.kernel
def weak_floats(A, C, s, k: T.constexpr = 1.5):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(8):
            C[0, i] = 2.0                       # a literal
            C[1, i] = -2.5
            C[2, i] = s                         # a run-time Python float
            C[3, i] = k                         # a float constexpr
            C[4, i] = 1.0 if A[i] > 0 else 0.0  # weak floats under a mask
            C[5, i] = T.if_then_else(A[i] > 0, 3.0, -1.0)


def test_weak_floats_convert_toward_zero(ptxas):
    a = np.array([1, -1] * 4, np.float32)
    c = np.zeros((6, 8), np.int32)
    weak_floats(a, c, 7.9)
    pos = a > 0
    np.testing.assert_array_equal(c[:4], [[2] * 8, [-2] * 8, [7] * 8, [1] * 8])
    np.testing.assert_array_equal(c[4], np.where(pos, 1, 0))
    np.testing.assert_array_equal(c[5], np.where(pos, 3, -1))
    ptxas(weak_floats.compile(a, c, 7.9, target="cuda", arch="sm_90a").ptx, "sm_90a")


# -- tiles ---------------------------------------------------------------------------------

@tilejit.kernel
def into_shared(A, C):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64,), "int32")
        for i in T.Parallel(64):
            s[i] = A[i] * 2                     # into the shared tile
        T.copy(s, C[0:64])


@tilejit.kernel
def into_fragment(A, C):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((16, 16), "int32")
        for i, j in T.Parallel(16, 16):
            f[i, j] = A[i, j]                   # into the fragment
        T.copy(f, C)


@tilejit.kernel
def into_local(A, C):
    with T.Kernel(1, threads=128) as bx:
        t = T.alloc_local((4,), "int16")
        for k in T.serial(4):
            t[k] = T.exp(A[k])                  # into the local tile
        for k in T.serial(4):
            C[k] = t[k]


def test_tile_element_stores():
    a1 = np.zeros(64, np.float32)
    c1 = np.zeros(64, np.int32)
    _both_raise(into_shared, (a1, c1), "# into the shared tile",
                _message("s", "shared tile", "int32", "float32"))
    a2 = np.zeros((16, 16), np.float16)
    c2 = np.zeros((16, 16), np.int32)
    _both_raise(into_fragment, (a2, c2), "# into the fragment",
                _message("f", "fragment", "int32", "float16"))
    a3 = np.zeros(4, np.float32)
    c3 = np.zeros(4, np.int16)
    _both_raise(into_local, (a3, c3), "# into the local tile",
                _message("t", "local tile", "int16", "float32"))


@tilejit.kernel
def copy_converts(A, C, D):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((16, 16), "float32")
        g = T.alloc_fragment((16, 16), "int32")
        for i, j in T.Parallel(16, 16):
            f[i, j] = A[i, j] * 2
        T.copy(f, g)                            # a tile conversion, as in TileLang
        T.copy(g, C)
        T.copy(f, D)                            # into an int tensor


@tilejit.kernel
def fill_converts(A, C):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((16,), "int32")
        T.fill(f, A[0] * 2)                     # a tile operation: converts, as T.copy
        T.copy(f, C)


def test_t_fill_of_an_integer_tile_converts():
    a = np.array([1.7, -2.5], np.float32)
    c = np.zeros(16, np.int32)
    fill_converts(a, c)
    np.testing.assert_array_equal(c, 3)
    fill_converts.compile(a, c, target="cuda", arch="sm_90a")


def test_t_copy_between_dtypes_still_converts(ptxas):
    a = np.linspace(-4, 4, 256, dtype=np.float32).reshape(16, 16)
    c = np.zeros((16, 16), np.int32)
    d = np.zeros((16, 16), np.int8)
    copy_converts(a, c, d)
    np.testing.assert_array_equal(c, np.trunc(a * 2).astype(np.int32))
    np.testing.assert_array_equal(d, np.trunc(a * 2).astype(np.int8))
    ptxas(copy_converts.compile(a, c, d, target="cuda", arch="sm_90a").ptx, "sm_90a")


# -- a kernel the simulator runs untyped (mbarriers, T.tma_copy) --------------------------------

@tilejit.kernel
def through_barrier(A, C, cast: T.constexpr = False):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((4, 8), A.dtype)
        bar = T.alloc_barrier(128)
        T.tma_copy(A[0:4, 0:8], s, barrier=bar)
        T.mbarrier_arrive(bar)
        T.mbarrier_wait_parity(bar, 0)
        for i, j in T.Parallel(4, 8):
            if cast:
                C[i, j] = T.cast(s[i, j], "int32")
            else:
                C[i, j] = s[i, j]               # untyped in simulation


def test_the_simulator_checks_what_it_stores_without_typing():
    a = np.full((4, 8), -1.5, np.float32)
    c = np.zeros((4, 8), np.int32)
    _both_raise(through_barrier, (a, c), "# untyped in simulation",
                _message("C", "tensor", "int32", "float32"))
    through_barrier(a, c, True)
    np.testing.assert_array_equal(c, -1)
    through_barrier.compile(a, c, True, target="cuda", arch="sm_90a")


def test_the_simulator_message_is_the_compilers_word_for_word():
    from tilejit.codegen.typing import templates
    from tilejit.sim import runtime
    for args in (("C", "tensor", "int32", "float32"), (None, "fragment", "uint8", "float16")):
        assert runtime.float_to_int_message(*args) == templates.float_to_int_message(*args)
    tensor = runtime.SimTensor(np.zeros(4, np.int64), T.int64, "X")
    tensor[0] = 2.5                             # weak: converted
    tensor[1] = np.float64(3.5)                 # float64: what masked weak floats become
    with pytest.raises(CompileError, match=r"a float32 value into 'X', an int64 tensor"):
        tensor[2] = np.float32(1.5)
    np.testing.assert_array_equal(tensor.data, [2, 3, 0, 0])

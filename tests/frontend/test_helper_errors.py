"""Helpers a kernel calls (issue 23): plain functions are inlined, also when a @T.macro
calls them; what kernel code cannot hold in one (try/except, **kwargs, print) is a
CompileError at the helper's line, not an internal compiler error; a library's function
is an error saying to call it on the host."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.testing import do_bench


def doubled(x):
    return x * 2


@T.macro
def doubled_plus_one(x):
    return doubled(x) + 1          # a plain helper called by a macro


def guarded(x):
    try:                            # TRY-LINE
        return x
    except Exception:
        return x


def with_options(x, **options):     # KWARGS-LINE
    return x


def chatty(x):
    print(x)                        # PRINT-LINE
    return x


@T.macro
def through_macro(x):
    return guarded(x)


def _line(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line(" not in line)


def test_a_macro_calling_a_plain_helper_inlines_it():
    @tilejit.kernel
    def k(A):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = doubled_plus_one(A[i])

    a = np.arange(32, dtype=np.float32)
    k(a)
    np.testing.assert_array_equal(a, np.arange(32) * 2 + 1)
    assert "call.uni" not in k.compile(a, target="cuda", arch="sm_90a").ptx


@pytest.mark.parametrize("helper, what, marker", [
    ("guarded", "try/except", "TRY-LINE"),
    ("with_options", "a **options parameter", "KWARGS-LINE"),
    ("chatty", "print() (use T.print(value, msg)", "PRINT-LINE"),
    ("through_macro", "unsupported in guarded(), a helper the kernel calls", "TRY-LINE"),
])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_what_a_helper_cannot_hold_is_an_error_at_its_line(helper, what, marker, target):
    fn = globals()[helper]

    @tilejit.kernel
    def k(A):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = fn(A[i])

    a = np.arange(32, dtype=np.float32)
    with pytest.raises(tilejit.CompileError) as e:
        k.compile(a, target=target, arch="sm_90a" if target == "cuda" else None)
    message = e.value.bare_message
    assert what in message and "a helper is compiled inline as kernel code" in message
    assert "internal compiler error" not in message
    assert e.value.filename == __file__ and e.value.lineno == _line(marker)


def test_a_library_function_is_called_on_the_host():
    @tilejit.kernel
    def k(A):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = do_bench(A[i])

    with pytest.raises(tilejit.CompileError) as e:
        k(np.zeros(32, np.float32))
    message = e.value.bare_message
    assert message.startswith("do_bench is a function of tilejit.")
    assert "which a kernel cannot call" in message and "call it on the host" in message
    assert "@T.macro to inline it" not in message


@T.macro
def _scale_into(dst, src):
    for i, j in T.Parallel(8, 8):
        dst[i, j] = src[i, j] * 1.5         # STORE-LINE


@T.macro
def _twice(dst, src):
    _scale_into(dst, src)                   # INNER-CALL


@tilejit.kernel
def _bad_store_in_a_macro(A, C, nested: T.constexpr = False):
    with T.Kernel(1, threads=128):
        y = T.alloc_fragment((8, 8), T.float32)
        z = T.alloc_shared((8, 8), T.int32)
        T.copy(A[0, 0], y)
        if nested:
            _twice(z, y)                    # OUTER-CALL
        else:
            _scale_into(z, y)               # DIRECT-CALL
        T.copy(z, C[0, 0])


@pytest.mark.parametrize("nested", [False, True])
def test_an_error_inside_a_macro_names_the_calls_that_led_there(nested):
    """The line shown is the macro's (`dst[i, j] = ...`, naming its parameter) while the
    message names the caller's tile ('z'): the call sites follow, outward."""
    with pytest.raises(tilejit.CompileError) as info:
        _bad_store_in_a_macro.compile(np.zeros((8, 8), np.float32), np.zeros((8, 8), np.int32),
                                      nested=nested, target="cuda", arch="sm_80")
    text = str(info.value)
    assert "cannot store a float32 value into 'z'" in text
    assert f"line {_line('# STORE-LINE')}\n" in text
    if nested:
        assert f"in _scale_into(), called at line {_line('# INNER-CALL')}\n" in text
        assert f"in _twice(), called at line {_line('# OUTER-CALL')}\n" in text
    else:
        assert f"in _scale_into(), called at line {_line('# DIRECT-CALL')}\n" in text
        assert "_twice()" not in text

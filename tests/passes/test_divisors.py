"""An integer // or % by a divisor that is 0 at compile time is a CompileError at its line,
on the GPU path and in the simulator alike (passes/divisors.py)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def divide(A, B, d: T.constexpr = 1, guarded: T.constexpr = False, op: T.constexpr = "//"):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            j = bx * 128 + i
            if j < N:
                if guarded:
                    if d > 0:
                        B[j] = A[j] // d
                elif op == "//":
                    B[j] = A[j] // (d * 2)
                elif op == "%":
                    B[j] = A[j] % d
                else:
                    B[j] = A[j] / d


def _run(target, **kw):
    a = np.arange(300, dtype=np.int32)
    k = tilejit.kernel(divide.func, target=target)
    if target == "sim":
        b = np.zeros(300, np.int32 if kw.get("op") != "/" else np.float32)
        k(a, b, **kw)
        return b
    return k.compile(a, np.zeros(300, np.int32), arch="sm_80", **kw)


@pytest.mark.parametrize("target", ["sim", "cuda"])
@pytest.mark.parametrize("op", ["//", "%"])
def test_a_compile_time_zero_divisor_is_an_error_at_its_line(target, op):
    with pytest.raises(tilejit.CompileError, match=r"integer (//|%) by zero: `.*` is 0 at "
                                                   r"compile time \(with d=0\)") as e:
        _run(target, d=0, op=op)
    assert e.value.lineno is not None and "B[j] = A[j]" in str(e.value)


def test_a_branch_the_constexpr_turns_off_is_not_checked_and_others_run():
    assert (_run("sim", d=0, guarded=True) == 0).all()
    np.testing.assert_array_equal(_run("sim", d=3), np.arange(300) // 6)
    _run("cuda", d=0, guarded=True)

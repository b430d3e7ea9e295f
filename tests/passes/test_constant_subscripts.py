"""``X[k]`` of a module container at a compile-time index is its element before typing
(passes/constant_subscripts.py): a helper picked from a dict is inlined, as TileLang runs
the lookup while it builds the kernel; a kernel's own names are never taken for the
module's."""
import numpy as np

import tilejit
import tilejit.language as T

OPS = {"twice": lambda x: x * 2, "square": lambda x: x * x}
SCALES = (0.5, 3.0)
A = [100.0, 200.0]          # a module global named like the kernel's parameter


@tilejit.kernel
def pick(A, B, op: T.constexpr, which: T.constexpr):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = OPS[op](A[i]) * SCALES[which] + A[0]


def test_a_helper_from_a_dict_at_a_compile_time_key(ptxas):
    a = np.arange(32, dtype=np.float32)
    for op, which, want in (("twice", 1, a * 2 * 3.0 + a[0]), ("square", 0, a * a * 0.5)):
        b = np.zeros_like(a)
        pick(a, b, op, which)
        np.testing.assert_allclose(b, want)
        ptx = pick.compile(a, b, op, which, target="cuda", arch="sm_80").ptx
        assert "call.uni" not in ptx
        ptxas(ptx, "sm_80")

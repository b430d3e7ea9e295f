"""A classic @T.prim_func in a module with ``from __future__ import annotations`` (its
signature's annotations are strings): imported by test_function_attrs.py."""
from __future__ import annotations

import tilejit.language as T

N = 16


@T.prim_func
def doubled(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(N):
            B[i] = A[i] * 2

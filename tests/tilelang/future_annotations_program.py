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


def scaled(n: int, block: int, factor: float):
    """A factory whose kernel's annotations read ``dtype``, which its body does not (so
    ``dtype`` is not in the kernel's closure, only in the factory's locals)."""
    dtype = T.float32

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Out[bx * block + i] = X[bx * block + i] * factor
    return main

"""``tilelang.par_compile(prim_funcs, ...)``, TileLang's module-level form: each prim_func
compiled in order, a failure raised or, with ``ignore_error``, None in its place
(tilelang/classic.par_compile)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def scale(M, N, factor):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
            for i, j in T.Parallel(16, N):
                C[bx * 16 + i, j] = A[bx * 16 + i, j] * factor
    return main


def unbuildable():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        A[0] = 1.0                          # no T.Kernel: refused when it is built
    return main


def test_each_prim_func_compiles_in_order_and_runs():
    shapes = [(32, 8, 2.0), (48, 4, -1.5)]
    kernels = tilelang.par_compile([scale(*s) for s in shapes], out_idx=[1], num_workers=4)
    assert len(kernels) == 2
    for (m, n, factor), kernel in zip(shapes, kernels):
        a = torch.randn(m, n)
        torch.testing.assert_close(kernel(a), a * factor)


def test_a_failure_raises_or_gives_none():
    with pytest.raises(tilelang.errors.CompileError):
        tilelang.par_compile([scale(16, 4, 1.0), unbuildable()])
    with pytest.warns(UserWarning, match="par_compile: function 0 did not build"):
        kernels = tilelang.par_compile([unbuildable(), scale(16, 4, 3.0)], out_idx=[1],
                                       ignore_error=True)
    assert kernels[0] is None
    a = torch.randn(16, 4)
    torch.testing.assert_close(kernels[1](a), a * 3.0)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_num_workers_is_checked(bad):
    with pytest.raises(ValueError, match=f"num_workers must be a positive int or None, "
                                         f"got {bad!r}"):
        tilelang.par_compile([scale(16, 4, 1.0)], num_workers=bad)

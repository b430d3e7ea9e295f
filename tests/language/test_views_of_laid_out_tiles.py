"""A view (T.reshape) of a shared tile the kernel lays out itself (an MMA swizzle given
by T.annotate_layout), as TileLang's reshape test writes it: the view's element of
row-major number f is the tile's element f, read where the tile's layout puts it (it was
refused: "a tile with views keeps the row-major layout"). In simulation, the view's
offsets against the tile's, PTX assembled, on the GPU against the simulator."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.ir.addressing import Var, evaluate
from tilejit.ir.view_layout import ViewLayout
from tilejit.layouts import make_swizzled_layout, offset_table
from tilejit.tilelang.cuda.intrinsics.layout.mma_layout import make_mma_swizzle_layout


def swizzled_then_flat(N, M, dtype):
    @T.prim_func
    def main(A: T.Tensor((N // M, M), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as _:
            A_shared = T.alloc_shared((N // M, M), dtype)
            T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared)})
            T.copy(A, A_shared)
            flat = T.reshape(A_shared, [N])
            T.copy(flat, B)
    return main


@pytest.mark.parametrize("N, M, dtype", [(1024, 32, "float16"), (2048, 64, "float16"),
                                         (1024, 32, "float32")])
def test_a_reshape_of_a_swizzled_tile(N, M, dtype):
    a = torch.randn(N // M, M).to(getattr(torch, dtype))
    b = tilelang.compile(swizzled_then_flat(N, M, dtype), out_idx=[1], target="sim")(a)
    torch.testing.assert_close(b, a.reshape(N), rtol=0, atol=0)


def test_the_views_offsets_are_the_tiles():
    base = make_swizzled_layout((32, 64), 2)
    view = ViewLayout(base, (32, 64), (16, 2, 64))
    table = np.asarray(offset_table(base, (32, 64))).reshape(16, 2, 64)
    np.testing.assert_array_equal(view.offset_table(), table)
    names = [Var(f"c{k}") for k in range(3)]
    grid = np.indices((16, 2, 64))
    got = evaluate(view.offset_expr(names), {n.name: g for n, g in zip(names, grid)})
    np.testing.assert_array_equal(got, table)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    kernel = tilelang.compile(swizzled_then_flat(1024, 32, "float16"), out_idx=[1])
    ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("N, M, dtype", [(1024, 32, "float16"), (2048, 64, "float16"),
                                         (1024, 32, "float32")])
def test_on_the_gpu(N, M, dtype):
    a = torch.randn(N // M, M).to(getattr(torch, dtype))
    b = tilelang.compile(swizzled_then_flat(N, M, dtype), out_idx=[1])(a.cuda())
    torch.testing.assert_close(b.cpu(), a.reshape(N), rtol=0, atol=0)

"""TIR's ``T.And``/``T.Or``/``T.Not`` (TileOPs' softmax and cumulative kernels) are
``and``/``or``/``not``, and ``T.func_attr({...})`` at a kernel's top (older TileLang
programs) is dropped: in simulation, in PTX through ptxas, and on the GPU against torch."""
import pytest
import torch

import tilejit
import tilejit.language as T


def masked_copy(M, N, bm=32, bn=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                r, c = by * bm + i, bx * bn + j
                if T.And(r < M, c < N):
                    B[r, c] = T.if_then_else(T.Or(T.Not(A[r, c] > 0), r == 0), 0.0, A[r, c])
    return main


def _expected(a):
    return torch.where((a <= 0) | (torch.arange(a.shape[0])[:, None] == 0), 0.0, a)


def test_tir_logic_and_func_attr(ptxas):
    a = torch.randn(50, 40)
    assert torch.equal(tilejit.compile(masked_copy(50, 40), out_idx=[1])(a), _expected(a))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(masked_copy(50, 40), out_idx=[1], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)
    assert bool(T.And(True, T.Not(False))) and not bool(T.Or(False, False))   # on the host
    with pytest.raises(TypeError, match=r"T.func_attr\(attrs\): expected a dict"):
        T.func_attr("tir.noalias")


@pytest.mark.gpu
def test_tir_logic_and_func_attr_on_the_gpu():
    a = torch.randn(300, 200)
    b = tilejit.compile(masked_copy(300, 200), out_idx=[1])(a.cuda())
    assert torch.equal(b.cpu(), _expected(a))


# -- in a helper the kernel calls (an image kernel's bounds test: typed and lowered, not
# rewritten, since a helper is compiled as written) ------------------------------------
def inside(y, x, h, w):
    return T.And(T.And(y >= 0, y < h), T.Not(T.Or(x < 0, x >= w)))


def is_set(flags, k):
    return T.Or(flags[k], T.Not(flags[k] + 1))     # an integer's truth: != 0


def window(H, W, dy, dx):
    @T.prim_func
    def main(A: T.Tensor((H, W), "float32"), F: T.Tensor((H,), "int32"),
             B: T.Tensor((H, W), "float32")):
        with T.Kernel(H, threads=64) as by:
            for j in T.Parallel(W):
                y, x = by + dy, j + dx
                B[by, j] = T.if_then_else(T.And(inside(y, x, H, W), is_set(F, by)),
                                          A[T.min(T.max(y, 0), H - 1), T.min(T.max(x, 0), W - 1)],
                                          -1.0)
    return main


def _window_expected(a, f, dy, dx):
    H, W = a.shape
    y = torch.arange(H)[:, None] + dy
    x = torch.arange(W)[None, :] + dx
    ok = (y >= 0) & (y < H) & (x >= 0) & (x < W) & ((f != 0) | (f == -1))[:, None]
    return torch.where(ok, a[y.clamp(0, H - 1), x.clamp(0, W - 1)], torch.tensor(-1.0))


@pytest.mark.parametrize("dy, dx", [(1, -3), (-2, 5)])
def test_tir_logic_in_a_helper(dy, dx, ptxas):
    a = torch.randn(24, 64)
    f = torch.tensor([0, 1, -1, 2] * 6, dtype=torch.int32)
    got = tilejit.compile(window(24, 64, dy, dx), out_idx=[2])(a, f)
    assert torch.equal(got, _window_expected(a, f, dy, dx))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(window(24, 64, dy, dx), out_idx=[2],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


def test_tir_logic_in_a_helper_takes_conditions():
    def bad(y):
        return T.Not(y, y)

    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = T.if_then_else(bad(i > 0), 1.0, 0.0)

    with pytest.raises(tilejit.CompileError, match=r"T.Not takes 1 condition\(s\), got 2"):
        tilejit.compile(main, target="cuda -arch=sm_80").get_kernel_source()


@pytest.mark.gpu
def test_tir_logic_in_a_helper_on_the_gpu():
    a = torch.randn(96, 128)
    f = torch.tensor([0, 1, -1, 2] * 24, dtype=torch.int32)
    got = tilejit.compile(window(96, 128, 3, -5), out_idx=[2])(a.cuda(), f.cuda())
    sim = tilejit.compile(window(96, 128, 3, -5), out_idx=[2], target="sim")(a, f)
    assert torch.equal(got.cpu(), _window_expected(a, f, 3, -5))
    assert torch.equal(got.cpu(), sim)

"""A layout the kernel's body builds and names, directly (``a_layout = T.Fragment(...)``)
or through a helper of the program's (``a_layout = _mma_a_layout()``, an int8 shuffle
GEMM's), then hands to ``T.annotate_layout``: computed when the kernel is parsed, as
TileLang runs the statement while building the kernel (``frontend/layout_values.py``)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T

torch = pytest.importorskip("torch")

M, K = 16, 32


def mma_like_layout(rows=M):
    return T.Fragment(
        (rows, K),
        forward_thread_fn=lambda i, j: 4 * (i % 8) + (j % 16) // 4,
        forward_index_fn=lambda i, j: 8 * (j // 16) + (i // 8) * 4 + j % 4)


def program(through_helper: bool):
    @T.prim_func
    def main(a: T.Tensor((M, K), "float32"), out: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((M, K), "float32")
            if through_helper:
                layout = mma_like_layout(M)
            else:
                layout = T.Fragment(
                    (M, K), forward_thread_fn=lambda i, j: 4 * (i % 8) + (j % 16) // 4,
                    forward_index_fn=lambda i, j: 8 * (j // 16) + (i // 8) * 4 + j % 4)
            T.annotate_layout({frag: layout})
            for i, j in T.Parallel(M, K):
                frag[i, j] = a[i, j] * 2.0 + i
            T.copy(frag, out)
    return main


def _expected(a):
    return a * 2 + torch.arange(M, dtype=a.dtype)[:, None]


@pytest.mark.parametrize("through_helper", [True, False], ids=["helper", "direct"])
def test_in_the_simulator(through_helper):
    a = torch.randn(M, K)
    torch.testing.assert_close(tilejit.compile(program(through_helper), out_idx=[1])(a),
                               _expected(a))


@pytest.mark.parametrize("through_helper", [True, False], ids=["helper", "direct"])
def test_the_fragment_takes_the_layout_and_the_ptx_assembles(through_helper, tmp_path,
                                                              monkeypatch, ptxas):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    ptx = tilejit.compile(program(through_helper), out_idx=[1],
                          target="cuda -arch=sm_90a").get_kernel_source()
    (directory,) = tmp_path.iterdir()
    (plan,) = [p for p in directory.iterdir() if p.name.endswith("_tile_plan.txt")]
    assert "fragment frag[16, 32] float32 (line" in plan.read_text()
    assert "the T.Fragment given to 'frag' by T.annotate_layout" in plan.read_text()
    ptxas(ptx, "sm_90a")


def test_a_layout_of_the_kernels_own_values_is_left_to_the_later_passes():
    @T.prim_func
    def main(a: T.Tensor((M, K), "float32"), out: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=32) as bx:
            frag = T.alloc_fragment((M, K), "float32")
            layout = mma_like_layout(M + bx)
            T.annotate_layout({frag: layout})
            T.copy(a, frag)
            T.copy(frag, out)
    with pytest.raises(tilejit.CompileError):
        tilejit.compile(main, out_idx=[1])(torch.randn(M, K))


@pytest.mark.gpu
@pytest.mark.parametrize("through_helper", [True, False], ids=["helper", "direct"])
def test_on_the_gpu_against_torch_and_the_simulator(through_helper):
    a = torch.randn(M, K)
    kernel = tilejit.compile(program(through_helper), out_idx=[1])
    out = kernel(a.cuda()).cpu()
    torch.testing.assert_close(out, _expected(a))
    assert np.array_equal(out.numpy(), kernel(a).numpy())

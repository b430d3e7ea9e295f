"""An eager ``@tilelang.jit`` program made inside a builder function whose signature's
annotations name the builder's locals that its body never reads (a MUSA MLA rope
kernel: stride symbols ``T.dynamic`` made in the builder, used only in
``T.StridedTensor`` annotations; the extent and dtypes likewise). Python evaluated the
annotations in the builder, so those names are no closure cells of the program; tilejit
re-reads the annotations, with the builder's locals from its frame where the program is
defined (``tilelang/jit._definition_scope``)."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def build(dtype=T.float32):
    m = T.dynamic("m")
    n = 8                       # an extent only the annotations read
    s_row = T.dynamic("s_row")  # a stride symbol only the annotations read
    out_dtype = dtype

    @tilelang.jit
    def copy_rows(x: T.StridedTensor[(m, n), (s_row, 1), dtype],
                  y: T.Tensor[(m, n), out_dtype]):
        with T.Kernel(m, threads=32) as bx:
            for j in T.serial(8):
                y[bx, j] = x[bx, j] * 2.0

    return copy_rows


def test_a_strided_view_doubles_in_the_simulator():
    big = torch.randn(4, 12)
    x, y = big[:, :8], torch.zeros(4, 8)
    build()(x, y)
    torch.testing.assert_close(y, x * 2)


def test_the_annotations_take_the_builders_values():
    with pytest.raises(TypeError, match=r"argument 'x': expected dtype float16 \(line \d+\), "
                                        r"got float32"):
        build(T.float16)(torch.randn(4, 12)[:, :8], torch.zeros(4, 8))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    x = np.zeros((4, 12), np.float32)[:, :8]
    ptx = build().compile(x, np.zeros((4, 8), np.float32), target="cuda",
                          arch=arch).get_kernel_source()
    assert "ld.global" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    big = torch.randn(6, 20)
    x, y = big[:, 4:12], torch.zeros(6, 8)
    build()(x.cuda(), yg := torch.zeros(6, 8, device="cuda"))
    build()(x, y)
    torch.testing.assert_close(yg.cpu(), x * 2)
    assert torch.equal(yg.cpu(), y)

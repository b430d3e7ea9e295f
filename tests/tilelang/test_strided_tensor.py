"""TileLang's ``T.StridedTensor(shape, strides, dtype)`` on a ``@T.prim_func``
parameter: the call checks the tensor's strides (a number must match; a symbol takes
the tensor's stride, the same across parameters, and may be used in the body); an
``out_idx`` output gets the annotated strides. As a TileLang user writes it: dtype
strings, ``tilejit.compile(..., out_idx=...)``, tensors that are slices of larger ones."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


def copy_rows(M, N, ld, block_M=32, block_N=32, dtype="float16"):
    """B = A, A's rows ``ld`` elements apart (a column slice of a wider matrix)."""
    @T.prim_func
    def main(A: T.StridedTensor((M, N), (ld, 1), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j]
    return main


def column_major_scaled(N, M, ld_a, ld_b):
    """B = A * 2 + ld_a for column-major A and B (strides (1, ld)); ``ld_a`` read in the
    body."""
    @T.prim_func
    def main(A: T.StridedTensor[(N, M), (1, ld_a), T.float32],
             B: T.StridedTensor[(N, M), (1, ld_b), T.float32]):
        with T.Kernel(M // 32, threads=32) as bx:
            col = bx * 32 + T.get_thread_binding(0)
            for row in T.serial(N):
                B[row, col] = A[row, col] * 2 + ld_a
    return main


def _column_major(rows, cols, ld, device="cpu", fill=True):
    base = (torch.randn if fill else torch.zeros)(cols, ld, device=device)
    return base.t()[:rows]          # shape (rows, cols), strides (1, ld)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_static_row_stride_copies_a_column_slice(dtype):
    kernel = tilejit.compile(copy_rows(64, 64, 96, dtype=dtype), out_idx=[1])
    a = torch.randn(64, 96).to(getattr(torch, dtype))
    out = kernel(a[:, :64])
    assert torch.equal(out, a[:, :64])


def test_a_stride_that_differs_is_refused_before_the_launch():
    kernel = tilejit.compile(copy_rows(64, 64, 96), out_idx=[1])
    with pytest.raises(ValueError, match=r"argument 'A': strides\[0\] must be 96, got 64"):
        kernel(torch.randn(64, 64).half())


def test_a_dynamic_stride_takes_any_leading_dimension():
    ld = T.dynamic("ld")
    kernel = tilejit.compile(copy_rows(64, 64, ld), out_idx=[1])
    for width in (64, 80, 128):
        a = torch.randn(64, width).half()
        assert torch.equal(kernel(a[:, :64]), a[:, :64])


def test_numpy_arrays_take_strides_in_elements():
    kernel = tilejit.compile(copy_rows(64, 64, 96, dtype="float32"), out_idx=[1])
    a = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a[:, :64]), a[:, :64])
    with pytest.raises(ValueError, match=r"strides\[0\] must be 96, got 64"):
        kernel(np.ascontiguousarray(a[:, :64]))


def test_column_major_tensors_and_a_stride_symbol_in_the_body():
    ld_a, ld_b = T.dynamic("ld_a"), T.dynamic("ld_b")
    kernel = tilejit.compile(column_major_scaled(48, 64, ld_a, ld_b))
    a, b = _column_major(48, 64, 50), _column_major(48, 64, 56, fill=False)
    assert a.stride() == (1, 50) and b.stride() == (1, 56)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2 + 50, rtol=0, atol=0)


def test_one_symbol_for_two_strides_must_agree():
    ld = T.dynamic("ld")
    kernel = tilejit.compile(column_major_scaled(48, 64, ld, ld))
    with pytest.raises(ValueError, match=r"symbol ld: A has 50 but B\.strides\[1\] is 56"):
        kernel(_column_major(48, 64, 50), _column_major(48, 64, 56))


def test_a_dimension_of_one_element_takes_any_stride():
    kernel = tilejit.compile(copy_rows(1, 64, 96, block_M=1, block_N=64), out_idx=[1])
    a = torch.randn(3, 64).half()[1:2]          # strides (64, 1), not (96, 1)
    assert torch.equal(kernel(a), a)


def test_an_output_gets_the_annotated_strides():
    @T.prim_func
    def transpose_into(A: T.Tensor((32, 64), "float32"),
                       B: T.StridedTensor((64, 32), (1, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i, j in T.Parallel(32, 64):
                B[j, i] = A[i, j]
    kernel = tilejit.compile(transpose_into, out_idx=[1])
    a = torch.randn(32, 64)
    out = kernel(a)
    assert out.shape == (64, 32) and out.stride() == (1, 64)
    torch.testing.assert_close(out, a.t(), rtol=0, atol=0)


@pytest.mark.parametrize("spelling", [
    lambda: T.StridedTensor((4, 8), (1,), "float16"),
    lambda: T.StridedTensor[(4, 8), (8, 1), "float16", "extra"],
])
def test_an_annotation_without_one_stride_per_dimension_is_an_error(spelling):
    with pytest.raises((TypeError, ValueError), match="T.StridedTensor"):
        spelling()


def test_the_annotation_spellings():
    assert T.StridedTensor[(4, 8), (16, 1)].dtype == T.float32
    ann = T.StridedTensor[[4, 8], [16, 1], T.float16]
    assert (ann.shape, ann.strides, ann.dtype) == ((4, 8), (16, 1), T.float16)
    assert isinstance(ann, T.Tensor)


def test_the_ptx_assembles(ptxas):
    ld_a, ld_b = T.dynamic("ld_a"), T.dynamic("ld_b")
    kernel = tilejit.compile(column_major_scaled(48, 64, ld_a, ld_b))
    tensors = [_column_major(48, 64, 50), _column_major(48, 64, 56)]
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch, tensors=tensors)
        assert "ld.global" in ptx and "st.global" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_gpu_matches_torch_and_the_simulator():
    ld = T.dynamic("ld")
    copy = tilejit.compile(copy_rows(256, 200, ld), out_idx=[1])
    a = torch.randn(256, 264, device="cuda").half()
    torch.testing.assert_close(copy(a[:, 3:203]), a[:, 3:203], rtol=0, atol=0)
    ld_a, ld_b = T.dynamic("ld_a"), T.dynamic("ld_b")
    scaled = tilejit.compile(column_major_scaled(96, 128, ld_a, ld_b))
    a, b = _column_major(96, 128, 100, "cuda"), _column_major(96, 128, 104, "cuda", False)
    scaled(a, b)
    torch.testing.assert_close(b, a * 2 + 100, rtol=0, atol=0)
    a_host, b_host = _column_major(96, 128, 100), _column_major(96, 128, 104, fill=False)
    a_host.copy_(a.cpu())
    scaled(a_host, b_host)
    torch.testing.assert_close(b.cpu(), b_host, rtol=0, atol=0)


def test_in_a_jit_signature_its_strides_are_checked():
    @tilejit.jit
    def f(A: T.StridedTensor((8,), (2,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            A[0] = 1.0
    x = torch.zeros(16)
    f(x[::2])
    assert x[0] == 1.0
    with pytest.raises(ValueError, match=r"argument 'A': strides\[0\] must be 2"):
        f(torch.zeros(8))


LD = T.dynamic("ld")


def stride_read_back(M, K, N=8):
    @T.prim_func
    def main(A: T.StridedTensor((M, N), (LD, 1), "float32"),
             B: T.StridedTensor((K, N), (LD, 1), "float32"), L: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            L[0] = LD
    return main


def test_a_stride_symbol_is_read_from_a_dimension_of_more_than_one_element():
    """A's one row may have any stride; the body's ld is B's, which the call checks."""
    kernel = tilejit.compile(stride_read_back(1, 4))
    out = torch.zeros(1, dtype=torch.int32)
    kernel(torch.randn(1, 8), torch.randn(4, 16)[:, :8], out)
    assert out.item() == 16


def test_an_output_of_one_row_needs_no_stride():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.StridedTensor((n, 8), (LD, 1), "float32"),
             B: T.StridedTensor((n, 8), (LD, 1), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 8):
                if i < n:
                    B[i, j] = A[i, j]
    kernel = tilejit.compile(main, out_idx=[1])
    for rows in (4, 1):
        a = torch.randn(rows, 12)[:, :8]
        out = kernel(a)
        assert out.shape == (rows, 8) and torch.equal(out, a)


def test_a_stride_written_as_a_multiple_of_a_symbol():
    s = T.dynamic("s")

    @T.prim_func
    def main(A: T.StridedTensor((4, 8), (2 * s, 1), "float32"), L: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            L[0] = s
    out = torch.zeros(1, dtype=torch.int32)
    tilejit.compile(main)(torch.randn(4, 16)[:, :8], out)
    assert out.item() == 8

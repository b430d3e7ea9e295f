"""The eager style (``@tilejit.jit`` bodies that annotate their tensors) with
``T.StridedTensor``: stride symbols take the tensor's strides and must agree, a number
must match, a dimension of one element takes any stride; and TileLang's
``T.empty(M, N, dtype=...)`` spelling of an output."""
import pytest
import torch

import tilejit
import tilejit.language as T


@T.macro
def copy_tiles(A, B):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, 32), T.ceildiv(N, 32), threads=128) as (bx, by):
        T.copy(A[bx * 32:bx * 32 + 32, by * 32:by * 32 + 32],
               B[bx * 32:bx * 32 + 32, by * 32:by * 32 + 32])


@tilejit.jit
def strided_copy(A, B):
    N, M, ld, one = T.const("N, M, ld, one")
    A: T.StridedTensor[[N, M], [ld, one], T.float32]
    B: T.StridedTensor[[N, M], [ld, one], T.float32]
    copy_tiles(A, B)


@tilejit.jit
def fixed_stride_copy(A, B):
    N, M = T.const("N, M")
    A: T.StridedTensor[[N, M], [512, 2], T.float32]
    B: T.Tensor[[N, M], T.float32]
    copy_tiles(A, B)


@tilejit.jit
def copy_out(A):
    M, N = T.const("M, N")
    A: T.Tensor[[M, N], T.float32]
    B = T.empty(M, N, dtype=A.dtype)
    copy_tiles(A, B)
    return B


@tilejit.jit
def copy_default_dtype(A):
    M, N = T.const("M, N")
    A: T.Tensor[[M, N], T.float32]
    B = T.empty(M, N)
    copy_tiles(A, B)
    return B


@tilejit.jit
def computed_stride_copy(A, B):
    N, M = T.const("N, M")
    A: T.StridedTensor[[N, M], [M * 2, 2], T.float32]
    B: T.Tensor[[N, M], T.float32]
    copy_tiles(A, B)


def test_a_stride_symbol_on_a_dimension_of_one_element():
    a = torch.randn(64, 2)[:, :1]
    b = torch.zeros(64, 2)[:, :1]
    strided_copy(a, b)
    assert torch.equal(a, b)


def test_computed_strides_are_checked():
    x = torch.randn(64, 64)
    out = torch.zeros(64, 32)
    computed_stride_copy(x[:, ::2], out)
    assert torch.equal(out, x[:, ::2])
    with pytest.raises(ValueError, match=r"strides\[0\] must be 2 \* M = 32 .*got 40"):
        computed_stride_copy(torch.randn(64, 40)[:, :32:2], torch.zeros(64, 16))


def _views(device="cpu"):
    a = torch.randn(64, 2, 128, 2, device=device)
    b = torch.zeros(64, 2, 128, 2, device=device)
    return a[:, 0, :, 0], b[:, 0, :, 0]


def test_stride_symbols_take_the_tensors_strides():
    a, b = _views()
    strided_copy(a, b)
    assert torch.equal(a, b)


def test_stride_symbols_must_agree():
    a, _ = _views()
    with pytest.raises(ValueError, match=r"symbol (ld|one): A has (512|2) but B.strides"):
        strided_copy(a, torch.zeros(64, 128))


def test_a_number_must_match():
    a, _ = _views()
    fixed_stride_copy(a, out := torch.zeros(64, 128))
    assert torch.equal(out, a)
    with pytest.raises(ValueError, match=r"argument 'A': strides\[0\] must be 512"):
        fixed_stride_copy(torch.zeros(64, 128), torch.zeros(64, 128))


def test_empty_with_extents_and_a_dtype_keyword():
    a = torch.randn(64, 96)
    assert torch.equal(copy_out(a), a)
    out = copy_default_dtype(a)         # T.empty(M, N): float32, TileLang's default
    assert out.dtype == torch.float32 and torch.equal(out, a)


@pytest.mark.gpu
def test_gpu_strided_copy_and_empty():
    a, b = _views("cuda")
    strided_copy(a, b)
    assert torch.equal(a, b)
    x = torch.randn(64, 96, device="cuda")
    assert torch.equal(copy_out(x), x)

"""TileLang's ``T.im2col`` (and the deprecated ``T.c2d_im2col``): a 2-D convolution as a
GEMM over the image's im2col matrix, checked against torch's ``conv2d`` in float64 for
strides, dilations, paddings and tail blocks of rows and columns; the filter flattened
TileLang's way, ``T.Tensor(shape, dtype, weight.data)``; bad calls are compile errors at
the line; the PTX assembles; on the GPU the same against the simulator."""
import warnings

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def conv(data, weight, out, K: T.constexpr, S: T.constexpr, D: T.constexpr, P: T.constexpr,
         block_M: T.constexpr = 64, block_N: T.constexpr = 64, block_K: T.constexpr = 32,
         deprecated: T.constexpr = 0):
    N, H, W, C = data.shape
    F = weight.shape[3]
    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(out.shape[0], block_M), threads=128) as (
            bx, by):
        data_shared = T.alloc_shared((block_M, block_K), data.dtype)
        w_shared = T.alloc_shared((block_K, block_N), data.dtype)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        w_flat = T.Tensor((K * K * C, F), data.dtype, weight.data)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K * K * C, block_K), num_stages=2):
            if deprecated:
                T.c2d_im2col(data, data_shared, by, k, K, S, D, P)
            else:
                T.im2col(data, data_shared, by, k, K, S, D, P)
            T.copy(w_flat[k * block_K, bx * block_N], w_shared)
            T.gemm(data_shared, w_shared, acc)
        T.copy(acc, out[by * block_M, bx * block_N])


def _reference(x, w, S, D, P):
    xt = torch.from_numpy(x).double().permute(0, 3, 1, 2)
    wt = torch.from_numpy(w).double().permute(3, 2, 0, 1)
    o = torch.nn.functional.conv2d(xt, wt, stride=S, padding=P, dilation=D)
    return o.permute(0, 2, 3, 1).reshape(-1, w.shape[3]).numpy()


CASES = [  # N, H, W, C, F, K, S, D, P: tail rows and taps, strides, dilations, no padding
    (2, 9, 7, 12, 40, 3, 1, 1, 1),
    (1, 10, 10, 8, 16, 3, 2, 2, 2),
    (3, 6, 5, 4, 8, 1, 1, 1, 0),
    (1, 11, 9, 16, 64, 5, 2, 1, 0),
]


def _operands(case, seed=0):
    N, H, W, C, F, K, S, D, P = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, H, W, C)).astype(np.float16)
    w = rng.standard_normal((K, K, C, F)).astype(np.float16)
    return x, w, _reference(x, w, S, D, P)


@pytest.mark.parametrize("case", CASES)
def test_a_convolution_in_the_simulator(case):
    x, w, ref = _operands(case)
    K, S, D, P = case[5:]
    out = np.zeros(ref.shape, np.float32)
    tilejit.kernel(conv.func, target="sim")(x, w, out, K, S, D, P)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


def test_the_deprecated_name_warns_and_does_the_same():
    x, w, ref = _operands(CASES[0])
    out = np.zeros(ref.shape, np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="T.im2col is a statement of a kernel's body"):
            T.c2d_im2col(None, None, 0, 0, 3, 1, 1, 1)
    assert any("T.c2d_im2col is deprecated" in str(s.message) for s in seen)
    tilejit.kernel(conv.func, target="sim")(x, w, out, *CASES[0][5:], deprecated=1)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_assembles(ptxas, arch):
    x, w, ref = _operands(CASES[1])
    ptx = conv.compile(x, w, np.zeros(ref.shape, np.float32), *CASES[1][5:], target="cuda",
                       arch=arch).ptx
    assert ("wgmma.mma_async" if arch == "sm_90a" else "mma.sync") in ptx
    ptxas(ptx, arch)


def test_bad_calls_are_compile_errors_at_the_line():
    @T.prim_func
    def region(A: T.Tensor((1, 4, 4, 8), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), "float16")
            T.im2col(A, S[0:16, :], 0, 0, 3, 1, 1, 1)
    with pytest.raises(CompileError, match=r"`col` must be the name of a shared tile, got "
                                           r"`S\[0:16, :\]`"):
        tilejit.compile(region, target="cuda -arch=sm_90a")

    @T.prim_func
    def missing(A: T.Tensor((1, 4, 4, 8), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), "float16")
            T.im2col(A, S, 0, 0, 3, 1)
    with pytest.raises(CompileError, match="missing dilation, pad"):
        tilejit.compile(missing, target="cuda -arch=sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES[:2])
def test_on_the_gpu_against_torch_and_the_simulator(case):
    x, w, ref = _operands(case)
    K, S, D, P = case[5:]
    out = torch.zeros(ref.shape, device="cuda")
    conv(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda(), out, K, S, D, P)
    sim = np.zeros(ref.shape, np.float32)
    tilejit.kernel(conv.func, target="sim")(x, w, sim, K, S, D, P)
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.cpu().numpy(), sim, rtol=1e-5, atol=1e-4)


def test_any_name_of_the_language_and_the_flattening_by_keywords():
    """The loop is written with the kernel's own name of the language module (here `tl`),
    whatever the tensors are called; T.Tensor(shape=, dtype=, data=) by keyword."""
    import tilejit.language as tl

    @tilejit.kernel
    def conv_tl(INPUT, weight, out):
        N, H, W, C = INPUT.shape
        F = weight.shape[3]
        with tl.Kernel(1, tl.ceildiv(out.shape[0], 64), threads=128) as (bx, by):
            col = tl.alloc_shared((64, 32), INPUT.dtype)
            w_s = tl.alloc_shared((32, 64), INPUT.dtype)
            acc = tl.alloc_fragment((64, 64), tl.float32)
            w_flat = tl.Tensor(dtype=INPUT.dtype, shape=(9 * C, F), data=weight.data)
            tl.clear(acc)
            for k in tl.serial(tl.ceildiv(9 * C, 32)):
                tl.im2col(INPUT, col, by, k, 3, 1, 1, 1)
                tl.copy(w_flat[k * 32, 0], w_s)
                tl.gemm(col, w_s, acc)
            tl.copy(acc, out[by * 64, 0])
    case = (1, 6, 6, 8, 64, 3, 1, 1, 1)
    x, w, ref = _operands(case)
    out = np.zeros(ref.shape, np.float32)
    tilejit.kernel(conv_tl.func, target="sim")(x, w, out)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


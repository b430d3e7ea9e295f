"""TileLang's helpers as its users import them: ``tilelang.cdiv`` and
``next_power_of_2``, ``T.clamp`` (in kernels and in Python), ``tilelang.utils``
(``TensorSupplyType``, ``get_tensor_supply``; ``tilelang.utils.tensor.torch_assert_close``)
and ``tilelang.testing`` (``torch_assert_close``, ``set_random_seed``). Simulated, with
the clamping kernel's PTX assembled for sm_80 and sm_90a and a ``gpu`` twin."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
import tilejit.testing
import tilejit.utils
import tilejit.utils.tensor
from tilejit.utils import TensorSupplyType, get_tensor_supply
from tilejit.utils.tensor import torch_assert_close

torch = pytest.importorskip("torch")


def test_cdiv_and_next_power_of_2():
    assert tilelang.cdiv(1000, 128) == 8 and tilelang.cdiv(1024, 128) == 8
    assert tilelang.cdiv is T.cdiv is T.ceildiv
    assert [tilelang.next_power_of_2(x) for x in (1, 2, 3, 17, 64)] == [1, 2, 4, 32, 64]


# -- T.clamp ---------------------------------------------------------------------------------
@tilelang.jit
def per_token_quant(X, block_M: int = 32, qmax: float = 127.0):
    """Each row scaled so its absmax is qmax, rounded values clamped to [-qmax, qmax]
    (TileLang's per-token cast example, with int8-range floats instead of fp8)."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float)
    Y = T.empty((M, N), T.float)
    S = T.empty((M,), T.float)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        x = T.alloc_fragment((block_M, N), T.float)
        amax = T.alloc_fragment((block_M,), T.float)
        s = T.alloc_fragment((block_M,), T.float)
        y = T.alloc_fragment((block_M, N), T.float)
        T.copy(X[bx * block_M, 0], x)
        T.reduce_absmax(x, amax, dim=1)
        for i in T.Parallel(block_M):
            s[i] = T.max(amax[i], 1e-4) / qmax
        for i, j in T.Parallel(block_M, N):
            y[i, j] = T.clamp(T.floor(x[i, j] / s[i] * 1.25 + 0.5), -qmax, qmax)
        T.copy(y, Y[bx * block_M, 0])
        T.copy(s, S[bx * block_M])
    return Y, S


def _quant_ref(x, qmax=127.0):
    s = x.abs().amax(1).clamp_min(1e-4) / qmax
    return torch.floor(x / s[:, None] * 1.25 + 0.5).clamp(-qmax, qmax), s


def test_clamp_in_a_kernel():
    x = torch.randn(64, 128)
    y, s = per_token_quant(x)
    ref_y, ref_s = _quant_ref(x)
    torch.testing.assert_close(s, ref_s)
    torch.testing.assert_close(y, ref_y, rtol=0, atol=1.0)   # a rounding tie may go either way
    assert y.abs().max() == 127 and (y == ref_y).float().mean() > 0.99


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_clamp_kernel_assembles(arch, ptxas):
    ptx = per_token_quant.compile(M=64, N=128, arch=arch).get_kernel_source()
    assert "max.f32" in ptx and "min.f32" in ptx
    ptxas(ptx, arch)


def test_clamp_by_keyword_and_imported_bare():
    from tilejit.language import clamp

    @tilelang.jit
    def clip(X, lo: float = -1.0, hi: float = 1.0):
        N = T.const("N")
        X: T.Tensor((N,), T.float)
        Y = T.empty((N,), T.float)
        Z = T.empty((N,), T.float)
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    Y[bx * 128 + i] = T.clamp(X[bx * 128 + i], min_val=lo, max_val=hi)
                    Z[bx * 128 + i] = clamp(X[bx * 128 + i], lo, hi)
        return Y, Z
    x = torch.linspace(-3, 3, 200)
    y, z = clip(x, lo=-0.5, hi=2.0)
    torch.testing.assert_close(y, x.clamp(-0.5, 2.0))
    torch.testing.assert_close(z, x.clamp(-0.5, 2.0))
    ptx = clip.compile(N=200, lo=-0.5, hi=2.0, arch="sm_80").get_kernel_source()
    assert "max.f32" in ptx and "min.f32" in ptx


def test_clamp_in_python():
    assert T.clamp(5, 0, 3) == 3 and T.clamp(-5, 0, 3) == 0 and T.clamp(2.5, 0, 3) == 2.5
    np.testing.assert_array_equal(T.clamp(np.array([-2.0, 0.5, 9.0]), -1.0, 1.0),
                                  [-1.0, 0.5, 1.0])


@pytest.mark.gpu
def test_clamp_on_gpu():
    x = torch.randn(4096, 1024, device="cuda")
    y, s = per_token_quant(x, block_M=4)    # 4 rows of 1024: 32 registers a thread each
    ref_y, ref_s = _quant_ref(x)
    torch.testing.assert_close(s, ref_s)
    assert (y == ref_y).float().mean() > 0.999


# -- tilelang.utils ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_auto_supply_of_floats_is_uniform_in_minus_one_one(dtype):
    t = get_tensor_supply(TensorSupplyType.Auto)(T.Tensor((64, 64), dtype))
    assert t.dtype == getattr(torch, dtype) and t.shape == (64, 64)
    assert t.min() >= -1 and t.max() <= 1 and t.float().std() > 0.3


@pytest.mark.parametrize("dtype, values", [("int32", {-2, -1, 0, 1, 2}), ("uint8", {0, 1, 2}),
                                           ("bool", {False, True}), ("int8", {-2, -1, 0, 1, 2})])
def test_integer_supply(dtype, values):
    t = get_tensor_supply(TensorSupplyType.Integer)(T.Tensor((1000,), dtype))
    assert set(t.tolist()) == values


@pytest.mark.parametrize("kind", [TensorSupplyType.Integer, TensorSupplyType.Auto])
def test_float8_integer_supply_is_the_int8_range_as_values(kind):
    """TileLang's: integers in [-128, 127] converted to float8 (e4m3 rounds the large
    ones), so a float8 GEMM's inputs span its range rather than [-2, 2]."""
    t = get_tensor_supply(kind)(T.Tensor((4096,), "float8_e4m3"))
    assert t.dtype == torch.float8_e4m3fn
    values = t.float()
    assert values.min() >= -128 and values.max() <= 128 and values.abs().max() > 64
    assert (values == values.round()).all()


def test_supply_kinds():
    supply = lambda kind, dtype="float32": get_tensor_supply(kind)(  # noqa: E731
        T.Tensor((4096,), dtype))
    assert (supply(TensorSupplyType.Zero) == 0).all() and (supply(TensorSupplyType.One) == 1).all()
    assert abs(supply(TensorSupplyType.Normal).mean().item() + 1) < 0.1     # TileLang's mean
    assert abs(supply(TensorSupplyType.Randn).mean().item()) < 0.1
    assert (supply(TensorSupplyType.Uniform, "int8") == 1).all()
    shaped = get_tensor_supply()(torch.empty(3, 5, dtype=torch.float16))
    assert shaped.shape == (3, 5) and shaped.dtype == torch.float16
    with pytest.raises(ValueError, match="symbolic extents"):
        get_tensor_supply()(T.Tensor((T.dynamic("n"), 4), "float32"))
    with pytest.raises(TypeError, match="TensorSupplyType"):
        get_tensor_supply("auto")


def test_torch_assert_close_allows_a_fraction_of_mismatches():
    a = torch.zeros(1000)
    b = a.clone()
    b[:3] = 1.0
    assert torch_assert_close(a, b, max_mismatched_ratio=0.005)
    with pytest.raises(AssertionError, match=r"Too many mismatched elements: 3 > 1 "):
        torch_assert_close(a, b)
    with pytest.raises(AssertionError, match="'dtype' do not match"):
        torch_assert_close(a, b.half())
    assert torch_assert_close(a, b.half(), check_dtype=False, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="'shape' do not match"):
        torch_assert_close(a, b[:10])
    nan = torch.tensor([float("nan"), 1.0])
    assert torch_assert_close(nan, nan.clone())
    with pytest.raises(AssertionError):
        torch_assert_close(nan, nan.clone(), equal_nan=False)
    assert tilejit.testing.torch_assert_close is torch_assert_close


def test_set_random_seed():
    tilejit.testing.set_random_seed(7)
    first = (np.random.rand(), torch.rand(1).item())
    tilejit.testing.set_random_seed(7)
    assert (np.random.rand(), torch.rand(1).item()) == first


def test_tilelang_utils_module_paths():
    assert tilelang.utils is tilejit.utils
    assert tilelang.TensorSupplyType is TensorSupplyType is tilejit.utils.tensor.TensorSupplyType

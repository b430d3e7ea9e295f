"""``nan_propagate`` of ``T.reduce_max``/``reduce_min``/``reduce_absmax`` (TileLang's
keyword): any NaN in a row gives NaN, as torch's amax/amin do; without it NaN is ignored.
In the simulator, in the PTX (max.NaN / min.NaN, assembled by ptxas) and, with ``-m gpu``,
on the device against torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def row_reduce(X, Y, op: T.constexpr = "max", nan: T.constexpr = True,
               block: T.constexpr = 4):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        x = T.alloc_fragment((block, N), X.dtype)
        y = T.alloc_fragment((block,), T.float32)
        T.copy(X[bx * block, 0], x)
        if op == "max":
            T.reduce_max(x, y, dim=1, nan_propagate=nan)
        elif op == "min":
            T.reduce_min(x, y, dim=1, nan_propagate=nan)
        else:
            T.reduce_absmax(x, y, dim=1, nan_propagate=nan)
        T.copy(y, Y[bx * block])


def _inputs(M=16, N=256, device="cpu"):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(M, N, generator=g)
    x[1, 7] = float("nan")                      # one NaN
    x[2, :] = float("nan")                      # a whole row
    x[3, 0] = float("nan")
    x[3, 5] = float("inf")
    return x.to(device)


def _expected(x, op, nan):
    x = x.double().cpu()
    if op == "absmax":
        x = x.abs()
    if nan:
        return x.amax(1) if op != "min" else x.amin(1)
    big = op != "min"
    filled = torch.where(x.isnan(), torch.full_like(x, -np.inf if big else np.inf), x)
    out = filled.amax(1) if big else filled.amin(1)
    return torch.where(x.isnan().all(1), torch.full_like(out, np.nan), out)


@pytest.mark.parametrize("op", ["max", "min", "absmax"])
@pytest.mark.parametrize("nan", [True, False])
def test_in_the_simulator(op, nan):
    x = _inputs()
    y = torch.zeros(16)
    row_reduce(x, y, op=op, nan=nan)
    torch.testing.assert_close(y.double(), _expected(x, op, nan), equal_nan=True)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_uses_the_nan_instructions(arch, ptxas):
    x, y = np.zeros((16, 256), np.float32), np.zeros(16, np.float32)
    for op, instr in (("max", "max.NaN.f32"), ("min", "min.NaN.f32")):
        ptx = row_reduce.compile(x, y, op=op, target="cuda", arch=arch).ptx
        assert instr in ptx
        ptxas(ptx, arch)
        plain = row_reduce.compile(x, y, op=op, nan=False, target="cuda", arch=arch).ptx
        assert ".NaN" not in plain


def test_nan_propagate_must_be_known_at_compile_time():
    @tilejit.kernel
    def bad(X, Y, flag):
        with T.Kernel(1, threads=32):
            x = T.alloc_fragment((32,), T.float32)
            y = T.alloc_fragment((1,), T.float32)
            T.copy(X[0], x)
            T.reduce_max(x, y, nan_propagate=flag)
            T.copy(y, Y[0])
    with pytest.raises(tilejit.CompileError, match="nan_propagate"):
        bad(np.zeros(32, np.float32), np.zeros(1, np.float32), 1)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["max", "min", "absmax"])
@pytest.mark.parametrize("nan", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_on_the_gpu(op, nan, dtype):
    x = _inputs(64, 1000, "cuda").to(dtype)
    y = torch.zeros(64, device="cuda")
    row_reduce(x, y, op=op, nan=nan)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double().cpu(), _expected(x, op, nan), equal_nan=True)
    sim = torch.zeros(64)
    tilejit.kernel(row_reduce.func, target="sim")(x.cpu(), sim, op=op, nan=nan)
    torch.testing.assert_close(y.cpu(), sim, equal_nan=True)

"""``kernel.params`` (TileLang's ``list[KernelParam]``: each parameter's dtype and shape,
outputs included) and the modules a harness imports them from: ``tilelang.jit``
(``JITKernel``, ``JITImpl``, ``compile``) beside the ``tilelang.jit`` decorator, and
``tilelang.engine.param``. A test harness written for TileLang makes its inputs from the
compiled kernel's params, as the puzzle sets' ``common/utils.py`` does."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.language.compat import NotSupportedError


@tilelang.jit
def add(A, B, BLOCK: int):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float16)
    C = T.empty((N,), T.float32)
    with T.Kernel(N // BLOCK, threads=32) as bx:
        for i in T.Parallel(BLOCK):
            C[bx * BLOCK + i] = A[bx * BLOCK + i] + B[bx * BLOCK + i]
    return C


def scale(M, N, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), alpha: T.float32, Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, N):
                Y[i, j] = X[i, j] * alpha
    return main


def test_the_jit_module_and_the_decorator_share_a_name():
    from tilejit.jit import JITImpl, JITKernel, compile as jit_compile
    import tilejit.jit
    assert tilelang.jit is tilejit.jit and callable(tilelang.jit)   # still the decorator
    assert isinstance(add, JITImpl)
    assert jit_compile is tilelang.compile
    assert isinstance(add.compile(N=64, BLOCK=32), JITKernel)
    with pytest.raises(ImportError, match="tilelang.jit.adapter_cache is not supported"):
        from tilejit.jit import adapter_cache  # noqa: F401


def test_an_eager_programs_params_list_its_tensors_and_outputs():
    from tilejit.engine.param import KernelParam
    kernel = add.compile(N=64, BLOCK=32)
    params = kernel.params
    assert all(isinstance(p, KernelParam) for p in params)
    assert [(p.shape, p.dtype) for p in params] == [([64], "float32"), ([64], "float16"),
                                                     ([64], "float32")]
    # a harness's inputs from them, the output last (tile-ai/tilelang-puzzles' way)
    inputs = [torch.randn(p.shape, dtype=p.torch_dtype()) for p in params[:-1]]
    out = kernel(*inputs)
    torch.testing.assert_close(out, inputs[0] + inputs[1].float())


def test_a_prim_funcs_params_include_scalars_and_symbols():
    kernel = tilelang.compile(scale(16, 32), out_idx=[2])
    params = kernel.params
    assert [p.shape for p in params] == [[16, 32], [], [16, 32]]
    assert [str(p.dtype) for p in params] == ["float16", "float32", "float16"]
    assert [p.is_scalar() for p in params] == [False, True, False]
    M = T.symbolic("M")
    dynamic = tilelang.compile(scale(M, 32, "float32"), out_idx=[2])
    assert dynamic.params[0].shape == ["M", 32]


def test_kernel_param_queries():
    from tilejit.engine.param import KernelParam
    assert KernelParam("uint8", [4]).is_unsigned()
    assert KernelParam(T.float8_e4m3fn, [4]).is_float8()
    assert KernelParam("bool", []).is_boolean() and KernelParam("bool", []).is_scalar()
    assert KernelParam(torch.bfloat16, [2, 2]).dtype == "bfloat16"
    with pytest.raises(NotSupportedError, match="TVM Buffer"):
        KernelParam.from_buffer(object())

"""``T.Parallel(..., loop_layout=T.Fragment(...))`` and ``T.copy(..., loop_layout=...)``,
as TileLang's test_tilelang_annotate_loop_layout.py writes them: tilejit takes the layout
as a scheduling hint and lays the loop out itself, so the results are those of the loop
without it (docs/tilelang-compat.md). The Fragment reaches the kernel as a closure value
of a ``@T.prim_func`` or as a compile-time argument of an eager program."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def vec4(i, j):
    elems = i * 32 + j
    return (elems // 4) % 128, elems % 4 + (elems // 512) * 4


def vec4_replicated(i, j, rep):
    elems = i * 32 + j
    return (elems // 4) % 64 + rep * 64, elems % 4 + (elems // 256) * 4


def identity(i, j):
    return i, j


LAYOUTS = {"vec4": (vec4, None), "vec4_replicated": (vec4_replicated, 2),
           "identity": (identity, None)}


def scale_kernel(layout_name, dtype, M=128, N=32):
    fn, rep = LAYOUTS[layout_name]
    loop_layout = (T.Fragment((M, N), forward_fn=fn) if rep is None else
                   T.Fragment((M, N), forward_fn=fn, replicate=rep))

    @T.prim_func
    def scale(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, N, loop_layout=loop_layout):
                B[i, j] = A[i, j] * 2
    return tilelang.compile(scale, out_idx=[1])


def copy_kernel(layout_name, dtype, M=128, N=32):
    fn, rep = LAYOUTS[layout_name]
    loop_layout = (T.Fragment((M, N), forward_fn=fn) if rep is None else
                   T.Fragment((M, N), forward_fn=fn, replicate=rep))

    @T.prim_func
    def copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            T.copy(A, B, loop_layout=loop_layout)
    return tilelang.compile(copy, out_idx=[1])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_parallel_loop_with_a_loop_layout_gives_the_same_results(layout, dtype):
    a = (np.arange(128 * 32) % 61).reshape(128, 32).astype(dtype)
    np.testing.assert_array_equal(scale_kernel(layout, dtype)(a), a * 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_copy_with_a_loop_layout_gives_the_same_results(dtype):
    a = torch.randn(128, 32).to(T.dtype(dtype).as_torch())
    assert torch.equal(copy_kernel("vec4_replicated", dtype)(a), a)


def test_the_hint_leaves_the_ptx_unchanged():
    with_hint = scale_kernel("vec4", "float32").get_kernel_source()
    M, N = 128, 32

    @T.prim_func
    def scale(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j] * 2
    plain = tilelang.compile(scale, out_idx=[1]).get_kernel_source()
    assert with_hint.replace("scale", "") == plain.replace("scale", "")


@tilelang.jit
def loop_layout_kernel(A, B, loop_layout):
    M, N = T.const("M, N")
    A: T.Tensor[(M, N), T.float32]
    B: T.Tensor[(M, N), T.float32]
    with T.Kernel(1, threads=128):
        for i, j in T.Parallel(M, N, loop_layout=loop_layout):
            B[i, j] = A[i, j] + 1.0


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_fragment_is_a_compile_time_argument(layout):
    fn, rep = LAYOUTS[layout]
    loop_layout = T.Fragment((128, 32), forward_fn=fn, replicate=rep or 1)
    kernel = loop_layout_kernel.compile(M=128, N=32, loop_layout=loop_layout)
    assert ".entry" in kernel.get_kernel_source()
    a = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gpu_a_parallel_loop_with_a_loop_layout(layout):
    kernel = scale_kernel(layout, "float16")
    a = torch.randn(128, 32).half()
    on_gpu = kernel(a.cuda()).cpu()
    assert torch.equal(on_gpu, a * 2) and torch.equal(on_gpu, kernel(a))

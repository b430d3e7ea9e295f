"""``tilejit.compile(prim_func)`` with every shape static compiles at once, as TileLang
compiles there: a T.gemm no warp partition covers (TileLang's issue 2537), a shared
layout that is not injective (issue 2632) and a typing error (an IEEE operation's
rounding mode a half type does not have) fail at ``compile``, not at the first call, and
the kernel compiled there is the one the first call runs (compiled once); a program with
a symbolic extent is checked at its first call, as before; a good program compiles and
runs."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language import GemmWarpPolicy
from tilejit.tilelang.layout import Layout


def matmul(M, N, K, threads, policy=GemmWarpPolicy.Square):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=threads):
            A_shared = T.alloc_shared((M, K), "float16")
            B_shared = T.alloc_shared((K, N), "float16")
            C_frag = T.alloc_fragment((M, N), "float32")
            T.clear(C_frag)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_frag, policy=policy)  # THE-GEMM
            T.copy(C_frag, C)
    return main


@pytest.mark.parametrize("target", ["auto", "cuda"])
@pytest.mark.parametrize("M, N, threads", [(16, 104, 384), (288, 8, 544), (16, 16, 224)])
def test_a_gemm_no_warp_partition_covers_fails_at_compile(M, N, threads, target):
    with pytest.raises(tilejit.CompileError, match="No valid warp partition") as e:
        tilejit.compile(matmul(M, N, 32, threads), out_idx=[2], target=target)
    assert "THE-GEMM" in str(e.value)


def roundtrip(fwd, n=128):
    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), Out: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            s = T.alloc_shared((n,), "int32")
            T.annotate_layout({s: Layout((n,), fwd)})
            for i in T.Parallel(n):
                s[i] = A[i]
            for i in T.Parallel(n):
                Out[i] = s[i]
    return main


@pytest.mark.parametrize("fwd", [lambda i: i % 64, lambda i: i * 0])
def test_a_shared_layout_that_is_not_injective_fails_at_compile(fwd):
    with pytest.raises(ValueError, match=r"shared buffer `s`.*must be injective.*both map"):
        tilejit.compile(roundtrip(fwd), out_idx=[1], target="cuda")


def test_good_programs_compile_and_run():
    kernel = tilejit.compile(roundtrip(lambda i: i * 2), out_idx=[1])
    a = np.arange(128, dtype=np.int32)
    np.testing.assert_array_equal(kernel(a), a)
    kernel = tilejit.compile(matmul(64, 64, 32, 128), out_idx=[2])
    a = torch.randint(-2, 3, (64, 32)).half()
    b = torch.randint(-2, 3, (32, 64)).half()
    torch.testing.assert_close(torch.as_tensor(kernel(a, b)), a.float() @ b.float())


def _gemm_of(n):
    @T.prim_func
    def bad(A: T.Tensor((n, 32), "float16"), C: T.Tensor((n, 104), "float32")):
        with T.Kernel(1, threads=384):
            A_shared = T.alloc_shared((16, 32), "float16")
            B_shared = T.alloc_shared((32, 104), "float16")
            C_frag = T.alloc_fragment((16, 104), "float32")
            T.clear(A_shared)
            T.clear(B_shared)
            T.clear(C_frag)
            T.gemm(A_shared, B_shared, C_frag)
            T.copy(C_frag, C[0:16, :])
    return bad


def test_a_dynamic_extent_is_checked_at_compile():
    """A T.dynamic extent is one kernel for every size: checked with its placeholder
    size when the program is compiled, as TileLang compiles it there."""
    with pytest.raises(tilejit.CompileError, match="No valid warp partition"):
        tilejit.compile(_gemm_of(T.dynamic("n")), out_idx=[1])


@pytest.mark.gpu
def test_early_checks_on_gpu():
    with pytest.raises(tilejit.CompileError, match="No valid warp partition"):
        tilejit.compile(matmul(16, 104, 32, 384), out_idx=[2])
    kernel = tilejit.compile(matmul(64, 64, 32, 128), out_idx=[2])
    a = torch.randint(-2, 3, (64, 32), device="cuda").half()
    b = torch.randint(-2, 3, (32, 64), device="cuda").half()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float())


# -- the target's arch, and keywords tilejit.compile does not take ------------------------------
@pytest.mark.parametrize("target, arch", [
    ("cuda -arch=sm_80", "sm_80"), ("cuda -arch sm_86", "sm_86"),
    ({"kind": "cuda", "arch": "sm_90a"}, "sm_90a")])
def test_an_arch_named_by_the_target_is_the_one_compiled_for(target, arch, ptxas):
    kernel = tilejit.compile(matmul(64, 64, 32, 128), target=target)
    ptx = kernel.get_kernel_source()
    assert f".target {arch}" in ptx
    ptxas(ptx, arch)


def test_compile_names_a_keyword_it_does_not_take():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'arch'.*"
                                        r"target=\"cuda -arch=sm_80\""):
        tilejit.compile(matmul(64, 64, 32, 128), arch="sm_80")
    with pytest.raises(ValueError, match="expected a CUDA arch.*got 'sm_8'"):
        tilejit.compile(matmul(64, 64, 32, 128), target="cuda -arch=sm_8")
    # TileLang's keywords that choose its host code are taken
    tilejit.compile(matmul(64, 64, 32, 128), execution_backend="cython", verbose=True,
                    target_host=None, compile_flags=["-O3"])
    # ... in TileLang's order: (func, out_idx, execution_backend, target, ...)
    ptx = tilejit.compile(matmul(64, 64, 32, 128), [2], "tvm_ffi",
                          "cuda -arch=sm_80").get_kernel_source()
    assert ".target sm_80" in ptx


# -- get_kernel_source() of a program with T.dynamic extents, without tensors ----------------
def dynamic_rows(block=128):
    n = T.dynamic("n")
    m = T.const("m")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] * 2.0

    @T.prim_func
    def specialized(A: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                if i < m:
                    A[i] = 0.0
    return main, specialized


def test_a_dynamic_extent_needs_no_example_tensor_for_the_source(ptxas):
    main, specialized = dynamic_rows()
    kernel = tilejit.compile(main, target="cuda -arch=sm_90a")
    ptx = kernel.get_kernel_source()            # TileLang's: the one kernel for every n
    for n in (17, 1000, 4096):
        a = torch.zeros(n)
        assert kernel.get_kernel_source(tensors=[a, a]) == ptx
    ptxas(ptx, "sm_90a")
    # a symbol the program specializes on still needs its size
    with pytest.raises(TypeError, match=r"A has symbolic extent\(s\) m; give example tensors"):
        tilejit.compile(specialized, target="cuda -arch=sm_90a").get_kernel_source()


def test_a_static_empty_grid_compiles_and_refuses_the_call():
    """TileLang compiles a `T.Kernel(0)` and raises when it is called (its issue 1993):
    the early check leaves the empty grid to the call, whose error names it."""
    @tilejit.jit
    def empty():
        @T.prim_func
        def kernel(out: T.Tensor[(4,), T.float32]):
            with T.Kernel(0, threads=1) as pid:
                out[pid] = T.float32(1.0)
        return kernel

    kernel = empty()
    out = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"grid extent 0 \(x\) is 0"):
        kernel(out)
    assert not out.any()
    compiled = tilejit.compile(empty.factory(), target="cuda")
    with pytest.raises(ValueError, match=r"grid extent 0 \(x\) is 0"):
        compiled(out)


def test_a_grid_from_a_dynamic_extent_is_checked_at_the_call():
    """The early check sizes a T.dynamic extent with a placeholder: a grid that is bad
    only at the placeholder's size (negative, above CUDA's y limit) is the call's to
    check, with its real sizes (found by a review: the program failed when made)."""
    @tilejit.jit
    def tail(skip=2048):
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n - skip, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    if skip + bx * 128 + i < n:
                        A[skip + bx * 128 + i] = 1.0
        return main

    a = np.zeros(4096, np.float32)
    tail()(a)
    assert a[2048:].all() and not a[:2048].any()
    with pytest.raises(ValueError, match="must not be negative"):
        tail()(np.zeros(100, np.float32))


def test_a_tensor_indexed_with_too_few_indices_names_the_line():
    """`Y[i]` on a tensor annotated 2-d: a CompileError at that line when the program is
    compiled (it was the call's error, which blamed the output tilejit allocated)."""
    @T.prim_func
    def main(X: T.Tensor((16, 16), T.float32), Y: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(16, 16):
                Y[i] = X[i, j]                  # one index for a 2-d tensor

    with pytest.raises(tilejit.CompileError, match=r"tensor 'Y' has 2 dimension\(s\) .*"
                                                   r"indexed with 1") as info:
        tilejit.compile(main, out_idx=-1)
    assert "one index for a 2-d tensor" in str(info.value)


# -- get_kernel_source() of a @tilejit.jit factory: the program for those arguments ---------
@tilejit.jit(out_idx=[1])
def doubled(n=256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    return main


def test_a_factorys_kernel_source_is_its_programs(ptxas):
    ptx = doubled.get_kernel_source()           # TileLang's, for the defaults
    assert ".maxntid 128" in ptx and ".minnctapersm 2" in ptx
    assert doubled.get_kernel_source(512) == doubled(512).get_kernel_source()
    ptxas(ptx, ptx.split(".target ")[1].split()[0])
    a = torch.arange(256, dtype=torch.float32)
    torch.testing.assert_close(doubled()(a), a * 2)


# -- a T.dynamic tensor moved whole to a tile: its size must be the tile's ---------------------
def whole_into_a_tile():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), O: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S)
            for i in T.Parallel(64):
                S[i] = S[i] + 1.0
            T.copy(S, O)
    return main


def test_a_dynamic_tensor_moved_whole_to_a_tile_is_refused_at_another_size(ptxas):
    """The kernel is specialized on the tensor's shape (a whole copy has the tile's
    extents): the size of the tile runs, another is the compile-time error of a static
    shape, at the call, where the simulator refuses it too."""
    kernel = tilejit.compile(whole_into_a_tile(), out_idx=[1])    # not checked yet
    torch.testing.assert_close(kernel(torch.ones(64)), torch.full((64,), 2.0))
    with pytest.raises(tilejit.CompileError, match="has shape \\(40,\\) and tile 'S'"):
        kernel(torch.ones(40))
    with pytest.raises(tilejit.CompileError, match="has shape \\(40,\\) and tile 'S'"):
        kernel.get_kernel_source(tensors=[torch.ones(40), torch.ones(40)])
    ptx = kernel.get_kernel_source(tensors=[torch.ones(64), torch.ones(64)])
    ptxas(ptx, ptx.split(".target ")[1].split()[0])


@pytest.mark.gpu
def test_a_dynamic_tensor_moved_whole_to_a_tile_on_the_gpu():
    kernel = tilejit.compile(whole_into_a_tile(), out_idx=[1])
    torch.testing.assert_close(kernel(torch.ones(64, device="cuda")).cpu(),
                               torch.full((64,), 2.0))
    with pytest.raises(tilejit.CompileError, match="has shape \\(40,\\) and tile 'S'"):
        kernel(torch.ones(40, device="cuda"))


def ieee_add(dtype, mode):
    @T.prim_func
    def main(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype), C: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                C[i] = T.ieee_add(A[i], B[i], mode)
    return main


@pytest.mark.parametrize("target", ["auto", "cuda"])
def test_a_typing_error_fails_at_compile(target):
    with pytest.raises(tilejit.CompileError, match="Only rounding mode 'rn' is available for "
                                                   "half precision") as e:
        tilejit.compile(ieee_add("float16", "rz"), out_idx=[2], target=target)
    assert "compile-time string" not in str(e.value)     # the typing retry's reason: not it


def test_the_kernel_compiled_at_compile_is_the_one_the_call_runs(monkeypatch):
    import tilejit.compiler.pipeline as pipeline
    calls = []
    original = pipeline.compile_kernel
    monkeypatch.setattr(pipeline, "compile_kernel",
                        lambda ks, spec: calls.append(spec) or original(ks, spec))
    kernel = tilejit.compile(ieee_add("float32", "rz"), out_idx=[2])
    assert len(calls) == 1
    a, b = torch.randn(64), torch.randn(64)
    c = kernel(a, b)
    c = kernel(a, b)
    assert len(calls) == 1
    want = (a.double() + b.double())
    assert torch.all(torch.abs(c.double()) <= torch.abs(want) + 1e-30)      # toward zero
    torch.testing.assert_close(c, want.float(), rtol=2 ** -22, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_source_of_a_compiled_kernel_is_not_compiled_again(monkeypatch, arch):
    """``tilejit.compile(..., target="cuda")`` then ``get_kernel_source()`` (TileLang's
    way to look at the code) compile once, whether or not the disk cache is on."""
    import tilejit.compiler.pipeline as pipeline
    import tilejit.runtime.kernel_cache as kernel_cache
    monkeypatch.setattr(kernel_cache, "cache_dir", lambda: None)
    calls = []
    original = pipeline.compile_kernel
    monkeypatch.setattr(pipeline, "compile_kernel",
                        lambda ks, spec: calls.append(spec) or original(ks, spec))
    kernel = tilejit.compile(ieee_add("float32", "rn"), out_idx=[2],
                             target=f"cuda -arch={arch}")
    assert len(calls) == 1
    ptx = kernel.get_kernel_source()
    assert len(calls) == 1 and f".target {arch}" in ptx
    assert kernel.get_kernel_source() == ptx and len(calls) == 1
    kernel.get_kernel_source(arch="sm_86" if arch == "sm_80" else "sm_80")  # another arch
    assert len(calls) == 2

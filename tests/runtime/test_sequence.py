"""Kernels of several launches with global scratch tensors (``T.alloc_global``), as
TileLang's split-K decodes are written: one kernel per ``with T.Kernel`` block, launched
in order, the scratch allocated per call (runtime/sequence.py)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def two_pass_sum(A, Out, block: T.constexpr = 256):
    n, = A.shape
    parts = T.ceildiv(n, block)
    partial = T.alloc_global([parts], T.float32)
    with T.Kernel(parts, threads=block) as bx:
        S = T.alloc_fragment((block,), T.float32)
        r = T.alloc_fragment((1,), T.float32)
        for i in T.Parallel(block):
            S[i] = T.if_then_else(bx * block + i < n, A[bx * block + i], 0.0)
        T.reduce_sum(S, r, dim=0)
        partial[bx] = r[0]
    with T.Kernel(1, threads=32) as _:
        acc = T.alloc_var(T.float32)
        acc = 0.0
        for j in T.serial(parts):
            acc += partial[j]
        Out[0] = acc


@tilejit.kernel
def scaled_rows(A, block: T.constexpr = 64):
    """An output (T.empty) written by the second launch from the first one's scratch."""
    m, n = A.shape
    row_max = T.alloc_global([m], A.dtype)
    B = T.empty((m, n), A.dtype)
    with T.Kernel(m, threads=32) as bx:
        acc = T.alloc_var(A.dtype)
        acc = A[bx, 0]
        for j in T.serial(n):
            acc = T.max(acc, A[bx, j])
        row_max[bx] = acc
    with T.Kernel(T.ceildiv(n, block), m, threads=block) as (bx, by):
        for j in T.Parallel(block):
            if bx * block + j < n:
                B[by, bx * block + j] = A[by, bx * block + j] / row_max[by]
    return B


def split_combine(M, N, parts=4):
    """TileLang's classic style: partial row sums per column split, then their combine."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        partial = T.alloc_global([M, parts], T.float32)
        with T.Kernel(parts, M, threads=32) as (bx, by):
            acc = T.alloc_var(T.float32)
            acc = 0.0
            for j in T.serial(N // parts):
                acc += A[by, bx * (N // parts) + j]
            partial[by, bx] = acc
        with T.Kernel(M, threads=32) as bx:
            total = T.alloc_var(T.float32)
            total = 0.0
            for k in T.serial(parts):
                total += partial[bx, k]
            Out[bx] = total
    return main


def test_two_launches_share_a_scratch_tensor():
    a = np.random.rand(1000).astype(np.float32)
    out = np.zeros(1, np.float32)
    two_pass_sum(a, out)
    np.testing.assert_allclose(out[0], a.astype(np.float64).sum(), rtol=1e-5)


def test_an_output_written_by_the_second_launch_is_returned():
    a = np.random.rand(6, 100).astype(np.float32) + 0.5
    b = scaled_rows(a)
    np.testing.assert_allclose(b, a / a.max(axis=1, keepdims=True), rtol=1e-6)


def test_tilelang_classic_style():
    kernel = tilelang.compile(split_combine(8, 64), out_idx=-1)
    a = torch.rand(8, 64)
    torch.testing.assert_close(kernel(a), a.sum(dim=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_each_launch_is_a_kernel_of_its_own(arch, ptxas):
    handle = two_pass_sum.compile(np.zeros(1000, np.float32), np.zeros(1, np.float32),
                                  target="cuda", arch=arch)
    assert len(handle.handles) == 2 and handle.ptx.count(".entry") == 2
    for h in handle.handles:
        ptxas(h.ptx, arch)
    # the program's source: one module ptxas takes, the entries named apart
    ptxas(handle.ptx, arch)
    assert handle.ptx.count(".version") == 1 and ".entry two_pass_sum_kernel_1(" in handle.ptx


def staged_through_shared(N):
    """Two launches, the first moving a whole tensor to a tile (T.copy(A, S))."""
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        tmp = T.alloc_global([N], T.float32)
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((N,), T.float32)
            T.copy(A, S)
            for i in T.Parallel(N):
                tmp[i] = S[i] * 2
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i] = tmp[i] + 1
    return main


def test_a_sequences_whole_copy_and_its_source_for_the_targets_arch(ptxas):
    kernel = tilelang.compile(staged_through_shared(128), out_idx=[1],
                              target="cuda -arch=sm_80")
    a = torch.randn(128)
    torch.testing.assert_close(kernel(a), a * 2 + 1)
    ptx = kernel.get_kernel_source()
    assert ".target sm_80" in ptx and ptx.count(".entry") == 2
    ptxas(ptx, "sm_80")


def test_statements_between_the_launches_are_refused_at_decoration():
    with pytest.raises(CompileError, match="may only have the blocks after its first one"):
        @tilejit.kernel
        def k(A):
            with T.Kernel(1, threads=32):
                A[0] = 1.0
            x = 2
            with T.Kernel(1, threads=32):
                A[1] = x


@pytest.mark.gpu
def test_on_gpu_against_torch_and_simulator():
    a = torch.rand(100_000, dtype=torch.float32)
    out = torch.zeros(1, device="cuda")
    two_pass_sum(a.cuda(), out)
    torch.testing.assert_close(out.cpu().double(), a.double().sum().reshape(1), rtol=1e-5,
                               atol=1e-3)
    x = torch.rand(33, 500, device="cuda") + 0.5
    torch.testing.assert_close(scaled_rows(x), x / x.amax(dim=1, keepdim=True))
    sim = tilejit.kernel(scaled_rows.func, target="sim")
    torch.testing.assert_close(scaled_rows(x).cpu(), sim(x.cpu()))
    kernel = tilelang.compile(split_combine(64, 256), out_idx=-1)
    y = torch.rand(64, 256, device="cuda")
    torch.testing.assert_close(kernel(y), y.sum(dim=1), rtol=1e-5, atol=1e-4)
    z = torch.rand(9, 300, device="cuda")
    torch.testing.assert_close(eager_two_launches(z), z - z.mean(dim=1, keepdim=True))


@tilelang.jit
def eager_two_launches(A, block=32):
    """TileLang's eager style (its fused MoE's form): the annotations in the body, an
    output returned, two launches."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    row = T.alloc_global([M], T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(M, threads=32) as bx:
        acc = T.alloc_var(T.float32)
        acc = 0.0
        for j in T.serial(N):
            acc += A[bx, j]
        row[bx] = acc
    with T.Kernel(T.ceildiv(N, block), M, threads=block) as (bx, by):
        for j in T.Parallel(block):
            if bx * block + j < N:
                B[by, bx * block + j] = A[by, bx * block + j] - row[by] / N
    return B


def test_tilelang_eager_style():
    a = torch.rand(5, 70)
    torch.testing.assert_close(eager_two_launches(a), a - a.mean(dim=1, keepdim=True))


def test_tilejit_jit_kernel_is_the_compiled_kernels_class():
    assert isinstance(tilelang.compile(split_combine(8, 64), out_idx=-1), tilelang.JITKernel)
    assert not isinstance(two_pass_sum, tilelang.JITKernel)


def test_launches_alike_in_threads_and_parameters_are_cached_apart():
    """The disk cache keys a kernel by its function's source and specialization; the two
    launches of split_combine share both (32 threads, the same parameters), so the key
    holds the launch's index too (a GPU run before it had the second launch load the
    first one's PTX)."""
    kernel = tilelang.compile(split_combine(16, 64), out_idx=-1).kernel
    a, out = np.zeros((16, 64), np.float32), np.zeros(16, np.float32)
    for _ in range(2):                      # the second time from the disk cache
        first, second = kernel.compile(a, out, target="cuda", arch="sm_90a").handles
        assert first.ptx != second.ptx
        assert second.ptx.count("ld.global") > 0 and first.ptx.count("st.global") > 0


def test_a_bfloat16_scratch_or_output_compiles_without_a_device(ptxas):
    """Compiling a program of several kernels without a device sizes its T.empty outputs
    and scratch by shape and dtype (numpy has no bfloat16: it was a TypeError)."""
    import tilejit as tilelang

    @tilelang.jit
    def two_steps(X):
        N = T.const("N")
        X: T.Tensor[[N], T.float32]
        Y = T.empty((N,), T.bfloat16)
        S = T.empty((N,), T.float32)
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                S[i] = X[i] * 2
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Y[i] = S[i]
        return Y, S

    @T.prim_func
    def scratch(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        S = T.alloc_global((128,), "bfloat16")
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                S[i] = X[i] * 2
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                Y[i] = S[i]
    x = torch.randn(128)
    y, _ = two_steps(x)
    torch.testing.assert_close(y, (x * 2).bfloat16())
    ptxas(two_steps.compile(x, target="cuda", arch="sm_90a").get_kernel_source(), "sm_90a")
    ptxas(tilelang.compile(scratch, out_idx=[1], target="cuda -arch=sm_80").get_kernel_source(),
          "sm_80")

"""``A = T.match_buffer(A, shape, dtype)`` in an eager program (TileLang's eager-JIT
tutorial binds a ``T.ptr`` parameter so, under a compile-time branch): the annotation
``A: T.Tensor[shape, dtype]`` at that place, its ``T.const`` symbols sized by the call's
tensor. Anywhere else it is an error saying what it is for."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def mark(A: T.ptr, is_2d=False):
    """The tutorial's program, writing where it reads: A[0, 0] (2-d) or A[0] (1-d)."""
    if is_2d:
        M, N = T.const("M, N")
        A = T.match_buffer(A, [M, N], T.float32)
        with T.Kernel(1, threads=32):
            A[M - 1, N - 1] = M * 1000 + N
    else:
        L = T.const("L")
        A = T.match_buffer(A, [L], dtype=T.float32)
        with T.Kernel(1, threads=32):
            A[L - 1] = L


@tilelang.jit
def scale(A, n: int = 2):
    """Without a branch, the dtype left to TileLang's default (float32)."""
    N = T.const("N")
    A = T.match_buffer(A, (N,))
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                A[bx * 128 + i] = A[bx * 128 + i] * n


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def test_the_tutorials_branches():
    a = torch.zeros(64, 96, device=_device())
    mark(a, is_2d=True)
    assert a[63, 95].item() == 64 * 1000 + 96 and a.count_nonzero().item() == 1
    b = torch.zeros(50, device=_device())
    mark(b)
    assert b[49].item() == 50 and b.count_nonzero().item() == 1


def test_a_match_without_a_dtype_is_float32():
    x = torch.randn(300, device=_device())
    want = x * 3
    scale(x, 3)
    torch.testing.assert_close(x, want)
    with pytest.raises(TypeError, match="expected dtype float32 .*got float16"):
        scale(torch.zeros(8, dtype=torch.float16, device=_device()))


def test_the_program_compiles_for_the_gpu(ptxas):
    for arch in ("sm_80", "sm_90a"):
        ptxas(mark.get_kernel_source(torch.zeros(4, 8), is_2d=True, arch=arch), arch)


def test_other_forms_are_named():
    with pytest.raises(tilelang.CompileError, match=r"argument `strides` is not supported"):
        @tilelang.jit
        def strided(A: T.ptr):
            N = T.const("N")
            A = T.match_buffer(A, [N], T.float32, strides=[1])
            with T.Kernel(1, threads=32):
                A[0] = 1.0
        strided(torch.zeros(4))
    with pytest.raises(tilelang.CompileError, match=r"matches a parameter to itself"):
        @tilelang.jit
        def renamed(A: T.ptr):
            N = T.const("N")
            B = T.match_buffer(A, [N], T.float32)
            with T.Kernel(1, threads=32):
                B[0] = 1.0
        renamed(torch.zeros(4))


@tilelang.jit(out_idx=-1)
def doubled(A: T.ptr, B: T.ptr):
    """An output matched as the inputs are: out_idx makes it, as for an annotated one."""
    N = T.const("N")
    A = T.match_buffer(A, [N], T.float32)
    B = T.match_buffer(B, [N], T.float32)
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                B[bx * 128 + i] = A[bx * 128 + i] * 2


def test_a_matched_output_is_made_by_out_idx():
    x = torch.randn(300, device=_device())
    torch.testing.assert_close(doubled(x), x * 2)


def test_a_match_under_a_branch_that_launches_no_kernel_says_where_it_may_stand():
    with pytest.raises(tilelang.CompileError, match=r"statements at the top of its body \(or "
                                                   r"of a branch that launches its kernel\)"):
        @tilelang.jit
        def branchy(A: T.ptr, is_2d=False):
            if is_2d:
                M, N = T.const("M, N")
                A = T.match_buffer(A, [M, N], T.float32)
            with T.Kernel(1, threads=32):
                A[0, 0] = 1.0
        branchy(torch.zeros(4, 4), is_2d=True)


def test_in_a_kernel_it_says_what_it_is_for():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            B = T.match_buffer(A, (16,), "float32")
            B[0] = 1.0
    with pytest.raises(tilelang.CompileError, match=r"in a kernel: T.match_buffer\(A, shape, "
                                                   r"dtype\) binds a parameter A of an eager"):
        tilelang.compile(main, target="sim")
    with pytest.raises(TypeError, match="binds a parameter A of an eager"):
        T.match_buffer(torch.zeros(4), (4,))


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    a = torch.zeros(64, 96, device="cuda")
    mark(a, is_2d=True)
    assert a[63, 95].item() == 64 * 1000 + 96 and a.count_nonzero().item() == 1
    x = torch.randn(1000, device="cuda")
    want = x.double() * 3
    scale(x, 3)
    torch.testing.assert_close(x.double(), want)
    s = torch.randn(1000)
    s_want = s * 2
    scale(s, 2)                     # on the CPU: the simulator
    torch.testing.assert_close(s, s_want)

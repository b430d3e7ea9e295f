"""An eager program whose `if` around `with T.Kernel` chooses its kernel per call
(tilelang/branching.py): each branch's program in simulation against torch, its PTX
assembled by ptxas, an `elif` chain, the errors; with ``-m gpu`` against the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

THRESHOLD = 0.0


@tilelang.jit
def scaled(A, mode: str = "add", factor: float = 2.0):
    N = T.const("N")
    A: T.Tensor[[N], T.float32]
    B = T.empty([N], T.float32)
    if mode == "mul":
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    B[bx * 64 + i] = A[bx * 64 + i] * factor
    elif mode == "relu" and THRESHOLD == 0.0:
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    B[bx * 128 + i] = T.max(A[bx * 128 + i], 0.0)
    else:
        with T.Kernel(1, threads=32):
            for i in T.serial(N):
                B[i] = A[i] + factor
    return B


@pytest.mark.parametrize("mode, want", [
    ("mul", lambda a: a * 2), ("relu", lambda a: a.clamp(min=0)), ("add", lambda a: a + 2)])
def test_each_branch_is_its_own_program(mode, want, ptxas):
    a = torch.randn(200)
    torch.testing.assert_close(scaled(a, mode), want(a))
    ptx = scaled.compile(a, mode, arch="sm_90a").get_kernel_source()
    ptxas(ptx, "sm_90a")
    assert scaled.program(a, mode) is scaled.program(a, mode=mode)     # one per outcome
    ptxas(scaled.get_kernel_source(N=96, mode=mode, arch="sm_80"), "sm_80")


def test_a_test_reading_a_name_the_body_binds_is_named():
    @tilelang.jit
    def late(A):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        big = N > 64
        if big:
            with T.Kernel(1, threads=32):
                for i in T.serial(N):
                    A[i] = 0.0
        else:
            with T.Kernel(1, threads=32):
                for i in T.serial(N):
                    A[i] = 1.0
    with pytest.raises(tilelang.CompileError, match=r"the `if` around `with T.Kernel` reads "
                                                    r"big, which the body binds"):
        late(torch.zeros(8))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["mul", "relu", "add"])
def test_gpu_matches_the_simulator(mode):
    a = torch.randn(200)
    torch.testing.assert_close(scaled(a.cuda(), mode).cpu(), scaled(a, mode))


@tilelang.jit(out_idx=[1])
def flagged(A, B, flag: bool = False):
    N = T.const("N")
    A: T.Tensor[[N], T.float32]
    B: T.Tensor[[N], T.float32]
    if flag:
        with T.Kernel(1, threads=32):
            for i in T.serial(N):
                B[i] = A[i] * 2.0
    else:
        with T.Kernel(1, threads=32):
            for i in T.serial(N):
                B[i] = A[i] + 1.0


def test_out_idx_parameters_are_not_the_calls_arguments():
    a = torch.randn(8)
    torch.testing.assert_close(flagged(a, True), a * 2)       # True is `flag`, not `B`
    torch.testing.assert_close(flagged.compile(a, True)(a), a * 2)
    torch.testing.assert_close(flagged(a), a + 1)
    (compiled,) = tilelang.par_compile([flagged.get_tir(T.Tensor((8,)), flag=True)])
    torch.testing.assert_close(compiled(a), a * 2)


@T.macro
def _doubled(A, B, N):
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                B[bx * 64 + i] = A[bx * 64 + i] * 2.0


@T.macro
def _incremented(A, B, N):
    with T.Kernel(1, threads=32):
        for i in T.serial(N):
            B[i] = A[i] + 1.0


def test_branches_calling_macros_that_launch_and_extra_keywords():
    @tilelang.jit
    def chosen(A, use_mul: bool = True, **options):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty([N], T.float32)
        if use_mul and not options.get("plain", False):
            _doubled(A, B, N)
        else:
            _incremented(A, B, N)
        return B
    x = torch.randn(100)
    torch.testing.assert_close(chosen(x), x * 2)
    torch.testing.assert_close(chosen(x, False), x + 1)
    torch.testing.assert_close(chosen(x, plain=True), x + 1)


def test_a_parameter_the_body_assigns_again_is_named():
    @tilelang.jit
    def lowered(A, mode: str = "add"):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty([N], T.float32)
        mode = mode.lower()
        if mode == "mul":
            with T.Kernel(1, threads=32):
                for i in T.serial(N):
                    B[i] = A[i] * 2.0
        else:
            with T.Kernel(1, threads=32):
                for i in T.serial(N):
                    B[i] = A[i] + 1.0
        return B
    with pytest.raises(tilelang.CompileError, match=r"reads mode, which the body binds"):
        lowered(torch.zeros(4), "MUL")

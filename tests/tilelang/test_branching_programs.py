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

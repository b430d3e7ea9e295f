"""What DeepSeek-V3.2's sparse-MLA backward needed: a ``T.Parallel`` reading a fragment
at rows shifted by a value fixed in the loop (``passes/shifted_fragments.py``), an atomic
in a loop that is not replicated beside one that is (``layout_inference._has_atomic``),
a compile-time parameter the program binds again (``H = H_kv``, ``rewrite.device_tree``),
and a region copy from a tensor to an output whose extents the tensor's shape gives
(``analysis.whole_shape_params``). Simulation against torch, PTX assembled, GPU twins."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


def halves(BS=64, D=64, split=2):
    """Each half of a 64-row gemm accumulator goes out through a half-height shared tile:
    the loop over the accumulator's shape reads rows bi + s * 32 under ``bi < 32``."""
    @T.prim_func
    def main(A: T.Tensor((BS, D), T.float16), B: T.Tensor((D, D), T.float16),
             C: T.Tensor((BS, D), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((BS, D), T.float16)
            B_s = T.alloc_shared((D, D), T.float16)
            acc = T.alloc_fragment((BS, D), T.float32)
            half = T.alloc_shared((BS // split, D), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            for s in range(split):
                for bi, d in T.Parallel(BS, D):
                    if bi < BS // split:
                        half[bi, d] = acc[bi + s * (BS // split), d]
                T.copy(half, C[s * (BS // split):(s + 1) * (BS // split), :])
    return main


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(6)
    return [torch.randn(64, 64, generator=g).to(torch.float16).to(device) for _ in range(2)]


def test_shifted_reads_in_simulation():
    A, B = _inputs()
    C = torch.zeros(64, 64)
    tilejit.compile(halves(), target="sim")(A, B, C)
    torch.testing.assert_close(C, (A.double() @ B.double()).float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_shifted_reads_compile(arch, ptxas):
    ptxas(tilejit.compile(halves(), target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_shifted_reads_on_the_gpu():
    A, B = _inputs("cuda")
    C = torch.zeros(64, 64, device="cuda")
    tilejit.compile(halves(), target="cuda")(A, B, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, (A.double() @ B.double()).float(), rtol=1e-3, atol=1e-3)


def atomics_beside_a_row_sum():
    """A row sum's result (a replicated fragment) in one loop, element atomics in another
    over the accumulator itself."""
    @T.prim_func
    def main(X: T.Tensor((64, 64), T.float32), C: T.Tensor((64, 64), T.float32),
             R: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((64, 64), T.float32)
            row = T.alloc_fragment((64,), T.float32)
            T.copy(X, x)
            T.reduce_sum(x, row, dim=1)
            for i in T.Parallel(64):
                R[i] = row[i]
            for i, j in T.Parallel(64, 64):
                T.atomic_add(C[i, j], x[i, j])
    return main


def test_atomics_in_a_loop_that_is_not_replicated(ptxas):
    X = torch.randn(64, 64)
    C, R = torch.ones(64, 64), torch.zeros(64)
    tilejit.compile(atomics_beside_a_row_sum(), target="sim")(X, C, R)
    torch.testing.assert_close(C, X + 1)
    torch.testing.assert_close(R, X.sum(1), rtol=1e-5, atol=1e-5)
    ptxas(tilejit.compile(atomics_beside_a_row_sum(), target="cuda -arch=sm_90a")
          .get_kernel_source(), "sm_90a")


@tilelang.jit
def rebound(X, H, kv_group=1):
    N = T.const("N")
    shape = [N, H]
    X: T.Tensor(shape, T.float32)
    Y = T.empty(shape, T.float32)
    H = H // kv_group           # the parameter bound again, after the annotation read it
    with T.Kernel(1, threads=128) as _:
        for i, j in T.Parallel(N, H):
            Y[i, j] = X[i, j] * 2
    return Y


def test_a_parameter_bound_again_in_the_program():
    X = torch.randn(4, 32)
    torch.testing.assert_close(rebound(X, 32), 2 * X)


@tilelang.jit
def copy_out(X, D, block=32):
    B, S = T.const("B, S")
    X: T.Tensor([B, S, D], T.float32)
    Y = T.empty([B, S, D], T.float16)
    with T.Kernel(T.ceildiv(S, block), B, threads=128) as (bx, bz):
        T.copy(X[bz, bx * block:(bx + 1) * block, :], Y[bz, bx * block:(bx + 1) * block, :])
    return Y


def test_a_region_copy_into_an_output_takes_the_tensors_extents():
    X = torch.randn(2, 64, 48)
    torch.testing.assert_close(copy_out(X, 48), X.to(torch.float16))

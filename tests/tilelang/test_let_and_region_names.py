"""TileLang's ``v = T.int32(); T.let(v, value)`` and names bound to a region of a shared
tile (``X_shared = A_shared[:block_M, :block_K]``), as its alias test writes a GEMM
(frontend/let_bindings.py)."""
import math

import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError

torch = pytest.importorskip("torch")


def matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, 2 * block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            X_shared = A_shared[:block_M, block_K:]      # the second half of A_shared
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                offset = T.int32()
                T.let(offset, ko * block_K)
                T.copy(A[by * block_M, offset], X_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared[:block_N, :block_K])
                T.gemm(X_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(128, 96, generator=g).half(), torch.randn(64, 96, generator=g).half())


def test_let_and_a_named_region_in_simulation():
    kernel = tilelang.compile(matmul(128, 64, 96, 64, 64, 32), out_idx=[2])
    a, b = _inputs()
    c = kernel(a, b)
    ref = a.double() @ b.double().T
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    program = matmul(128, 64, 96, 64, 64, 32)
    kernel = tilelang.compile(program, out_idx=[2], target="cuda")
    a, b = (x.numpy() for x in _inputs())
    ptx = kernel.kernel.compile(a, b, np.zeros((128, 64), np.float16), target="cuda",
                                arch=arch).ptx
    ptxas(ptx, arch)


def test_the_expression_form_of_let_is_not_supported():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.int32()
            A[0] = T.let(v, 1, v + 1)
    with pytest.raises(CompileError, match="T.let"):
        tilelang.compile(main)(torch.zeros(32))


@pytest.mark.gpu
def test_let_and_a_named_region_on_the_gpu():
    kernel = tilelang.compile(matmul(128, 64, 96, 64, 64, 32), out_idx=[2])
    a, b = _inputs(1)
    c = kernel(a.cuda(), b.cuda())
    torch.testing.assert_close(c.cpu().double(), a.double() @ b.double().T,
                               rtol=1e-2, atol=5e-2)
    torch.testing.assert_close(c.cpu(), kernel(a, b), rtol=1e-3, atol=1e-3)


def _split_scores(heads, max_seqlen_kv, block_N):
    @T.prim_func
    def main(S: T.Tensor((heads, math.ceil(max_seqlen_kv / block_N)), "float32"),
             Out: T.Tensor((heads,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            # a shape of Python's math on compile-time values, as TileLang's flash-decoding
            # example sizes its split scores
            S_shared = T.alloc_shared([heads, math.ceil(max_seqlen_kv / block_N)], "float32")
            total = T.alloc_fragment([heads], "float32")
            T.copy(S, S_shared)
            T.reduce_sum(S_shared, total, dim=1)
            T.copy(total, Out)
    return main


def test_a_tile_shape_from_pythons_math():
    kernel = tilelang.compile(_split_scores(4, 100, 32))
    s = torch.randn(4, 4)
    out = torch.empty(4)
    kernel(s, out)
    torch.testing.assert_close(out, s.sum(1), rtol=1e-5, atol=1e-5)


def scalars_declared_in_one_statement():
    # TileLang's issue 1008 declares two variables in one tuple assignment
    @T.prim_func
    def main(x: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            a, b = T.alloc_var(T.int32), T.alloc_var(T.int32, 7)
            lo, hi = T.alloc_var("int32", init=3), T.alloc_local((2,), "int32")
            hi[0] = bx
            a = a + lo
            for i in T.Parallel(128):
                x[bx * 128 + i] = a * 100 + b * 10 + hi[0]
    return main


def _expected_scalars():
    return np.repeat(np.array([370, 371], np.int32), 128)


def test_allocations_of_one_tuple_assignment_in_simulation():
    x = np.zeros(256, np.int32)
    tilelang.compile(scalars_declared_in_one_statement())(x)
    np.testing.assert_array_equal(x, _expected_scalars())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_allocations_of_one_tuple_assignment_assemble(arch, ptxas):
    kernel = tilelang.compile(scalars_declared_in_one_statement(), target="cuda")
    ptxas(kernel.kernel.compile(np.zeros(256, np.int32), target="cuda", arch=arch).ptx, arch)


def test_an_allocation_beside_other_values_in_one_tuple_assignment():
    @T.prim_func
    def main(x: T.Tensor((4,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            a, b = T.alloc_var(T.int32, 5), bx + 1
            x[bx] = a * 10 + b
    x = np.zeros(4, np.int32)
    tilelang.compile(main)(x)
    np.testing.assert_array_equal(x, [51, 52, 0, 0])


@pytest.mark.gpu
def test_allocations_of_one_tuple_assignment_on_the_gpu():
    x = torch.zeros(256, dtype=torch.int32, device="cuda")
    tilelang.compile(scalars_declared_in_one_statement())(x)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.cpu().numpy(), _expected_scalars())
    sim = np.zeros(256, np.int32)
    tilelang.compile(scalars_declared_in_one_statement())(sim)
    np.testing.assert_array_equal(x.cpu().numpy(), sim)

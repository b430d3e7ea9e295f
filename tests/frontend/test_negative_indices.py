"""TileLang's negative indices (frontend/negative_indices.py): an index negative
wherever it is evaluated counts from the end of its dimension (a constant, or an
expression of loop and block indices that makes it so); one that may be either is left
as written, its out-of-bounds access reported as any other. In simulation against
torch, PTX assembled by ptxas, and with ``-m gpu`` against torch and the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def from_the_end():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"),
             C: T.Tensor((4, 8), "float32"), D: T.Tensor((16,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((16,), "float32")
            T.copy(A, s)
            if bx == 0:
                B[0] = A[-1]
                for i in T.serial(4):
                    B[i + 1] = A[-i - 1]                 # A[15 - i]
                for i in T.unroll(3):
                    B[i + 5] = s[-2 * (i + 1)]           # s[14 - 2 i]
                B[8] = C[-1, -3]
            for i in T.Parallel(8):
                D[bx * 8 + i] = s[bx * 8 + i] + s[-1 - bx]   # s[15 - bx]
    return main


def _want(a, c):
    b = torch.zeros(16)
    b[0] = a[15]
    for i in range(4):
        b[i + 1] = a[15 - i]
    for i in range(3):
        b[i + 5] = a[14 - 2 * i]
    b[8] = c[3, 5]
    d = torch.cat([a[:8] + a[15], a[8:] + a[14]])
    return b, d


def test_in_simulation():
    a, c = torch.arange(16).float(), torch.arange(32).float().reshape(4, 8)
    b, d = torch.zeros(16), torch.zeros(16)
    tilelang.compile(from_the_end(), target="sim")(a, b, c, d)
    want_b, want_d = _want(a, c)
    assert torch.equal(b[:9], want_b[:9]) and torch.equal(d, want_d)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    ptxas(tilelang.compile(from_the_end()).get_kernel_source(arch=arch), arch)


def test_an_index_that_may_be_either_is_left_and_reported():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((16,), "float32")
            T.copy(A, s)
            for i in T.serial(8):
                B[i] = s[i - 3]             # negative for i < 3 only: as written
    with pytest.raises(IndexError, match=r"s\[-3\] is out of bounds"):
        tilelang.compile(main, out_idx=[1], target="sim")(torch.arange(16).float())


def test_a_compile_time_tuple_is_not_a_tensor():
    @tilelang.jit
    def plus_last(A, sizes=(3, 5, 7)):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                B[i] = A[i] + sizes[-1] + A[-1]
        return B
    a = torch.arange(8).float()
    assert plus_last(a).tolist() == (a + 7 + 7).tolist()


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    a, c = torch.arange(16).float(), torch.arange(32).float().reshape(4, 8)
    program = from_the_end()
    b, d = torch.zeros(16, device="cuda"), torch.zeros(16, device="cuda")
    tilelang.compile(program)(a.cuda(), b, c.cuda(), d)
    sb, sd = torch.zeros(16), torch.zeros(16)
    tilelang.compile(program, target="sim")(a, sb, c, sd)
    want_b, want_d = _want(a, c)
    assert torch.equal(b.cpu()[:9], want_b[:9]) and torch.equal(d.cpu(), want_d)
    assert torch.equal(b.cpu()[:9], sb[:9]) and torch.equal(d.cpu(), sd)


def test_loops_from_a_start():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(2, 6):
                B[i] = A[-i]                # i >= 2: A[16 - i]
            for j in range(1, 3):
                B[j + 5] = A[-1 - j]
    b = torch.zeros(8)
    tilelang.compile(main, target="sim")(torch.arange(16).float(), b)
    assert b[2:8].tolist() == [14.0, 13.0, 12.0, 11.0, 14.0, 13.0]


def test_a_loop_counting_down_proves_nothing():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((16,), "float32")
            T.copy(A, s)
            for i in T.serial(10, 0, -1):
                B[i % 8] = s[3 - i]         # 3 - i < 0 only for i > 3: as written
    with pytest.raises(IndexError, match=r"s\[-7\] is out of bounds"):
        tilelang.compile(main, out_idx=[1], target="sim")(torch.arange(16).float())

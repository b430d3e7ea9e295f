"""``T.copy`` of regions wholly inside their tensors is simulated on numpy views
(``semantics._basic_copy``), the general path (index arrays, masks for the elements
outside) for the rest: the same values, dtype conversions and errors either way."""
import pytest
import torch

import tilejit
import tilejit.language as T
import tilejit.sim.semantics as semantics
from tilejit.sim.runtime import UninitializedReadError


def staged(M, N, bm, bn, src_dtype, mid_dtype, dst_dtype):
    """global -> shared (mid dtype) -> fragment (float32) -> global, a ragged edge when
    bm, bn do not divide M, N (the general path there)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), src_dtype), B: T.Tensor((M, N), dst_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), mid_dtype)
            F = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, F)
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] * 3.0 + 1.0
            T.copy(F, B[by * bm, bx * bn])
    return main


def _run(program, a, out_dtype, general):
    if general:
        original = semantics._basic_copy
        semantics._basic_copy = lambda *args: False
    try:
        b = torch.zeros(a.shape, dtype=out_dtype)
        tilejit.compile(program, target="llvm")(a, b)
        return b
    finally:
        if general:
            semantics._basic_copy = original


@pytest.mark.parametrize("M, N, bm, bn", [(128, 128, 64, 64), (100, 72, 64, 32)])
@pytest.mark.parametrize("dtypes", [("float32", "float16", "float32"),
                                    ("float32", "bfloat16", "float16"),
                                    ("float16", "float32", "bfloat16")])
def test_views_and_index_arrays_agree(M, N, bm, bn, dtypes):
    src, mid, dst = dtypes
    a = (torch.randn(M, N, generator=torch.Generator().manual_seed(M)) * 300).to(
        getattr(torch, src))
    program = staged(M, N, bm, bn, src, mid, dst)
    fast = _run(program, a, getattr(torch, dst), general=False)
    slow = _run(program, a, getattr(torch, dst), general=True)
    assert torch.equal(fast.view(torch.uint8) if fast.dtype != torch.float32 else fast,
                       slow.view(torch.uint8) if slow.dtype != torch.float32 else slow)
    want = (a.to(getattr(torch, mid)).double() * 3 + 1).to(getattr(torch, dst))
    torch.testing.assert_close(fast.double(), want.double(), rtol=1e-2, atol=1e-2)


@T.prim_func
def reads_half_an_output(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((32,), "float32")
        T.copy(A[0:32], S)
        T.copy(S, B[0:32])
        T.copy(B[16:48], S)           # B's elements 32 … 47: nothing wrote them
        T.copy(S, A[0:32])


def test_an_unwritten_source_is_still_an_error():
    """B is the kernel's output (out_idx: torch.empty's memory), half of it written
    before a copy reads a region across the edge: the view path leaves it to the
    general one, which names the first element nothing wrote."""
    kernel = tilejit.compile(reads_half_an_output, out_idx=[1], target="llvm")
    with pytest.raises(UninitializedReadError, match=r"B\[32\]"):
        kernel(torch.zeros(64))


@T.prim_func
def runtime_bounds(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
                   n: T.int32, m: T.int32):
    with T.Kernel(1, threads=64):
        T.copy(A[n:m], B[n:m])


@pytest.mark.parametrize("general", [False, True])
def test_an_end_before_its_start_is_left_to_the_general_path(general):
    """A[20:10] (run-time bounds) is inside A, yet an empty slice of a view would do
    nothing where the general path raises: both paths answer as the general one."""
    if general:
        original = semantics._basic_copy
        semantics._basic_copy = lambda *args: False
    try:
        kernel = tilejit.compile(runtime_bounds, target="llvm")
        a, b = torch.arange(64.0), torch.zeros(64)
        kernel(a, b, 10, 20)
        assert torch.equal(b[10:20], a[10:20]) and not b[:10].any() and not b[20:].any()
        with pytest.raises(ValueError, match="negative dimensions"):
            kernel(a, torch.zeros(64), 20, 10)
    finally:
        if general:
            semantics._basic_copy = original


@T.prim_func
def writes_past_a_tile(A: T.Tensor((8, 32), "float32"), B: T.Tensor((8, 32), "float32")):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((8, 32), "float32")
        T.copy(A, S)
        T.copy(A[0, 0:32], S[8, 0:32])          # row 8 of an 8-row tile
        T.copy(S, B)


def test_a_tile_region_past_the_tile_is_an_error():
    """A global region past its tensor is guarded (nothing read or written there, as
    TileLang's safe memory access); a tile's is not: on the GPU the copy writes past the
    shared tile. The simulator had skipped those elements silently."""
    with pytest.raises(IndexError, match=r"T.copy: S\[8, 0\] is out of bounds for shape "
                                         r"\(8, 32\) \(a shared tile\)") as e:
        tilejit.compile(writes_past_a_tile, target="llvm")(torch.randn(8, 32),
                                                          torch.zeros(8, 32))
    assert "row 8 of an 8-row tile" in str(e.value)


def test_the_compile_refuses_it_too():
    with pytest.raises(tilejit.CompileError, match=r"T.copy: the region of shared tile 'S' "
                                                   r"\(shape \(8, 32\)\) runs past it: "
                                                   r"dimension 0 from 8 to 8") as e:
        tilejit.compile(writes_past_a_tile, target="cuda").get_kernel_source(arch="sm_90a")
    assert "row 8 of an 8-row tile" in str(e.value)

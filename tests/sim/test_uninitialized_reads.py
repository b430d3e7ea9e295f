"""Tile elements read before anything wrote them: ``UninitializedReadError`` in the
simulator, naming the tile, the first such element and the kernel's file and line (on the
GPU such an element holds whatever the registers or shared memory held)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.runtime import UninitializedReadError


def _raises(call, *needles):
    with pytest.raises(UninitializedReadError) as info:
        call()
    msg = str(info.value)
    for needle in (__file__,) + needles:
        assert needle in msg, msg
    return msg


@tilejit.kernel
def rows_then_all(A, B, rows: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_fragment((4, 8), T.float32)
        for i, j in T.Parallel(4, 8):
            if i < rows:
                acc[i, j] = A[i, j]
        for i, j in T.Parallel(4, 8):
            B[i, j] = acc[i, j] * 2  # READ-ALL


@tilejit.kernel
def rows_then_rows(A, B, rows: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_fragment((4, 8), T.float32)
        for i, j in T.Parallel(4, 8):
            if i < rows:
                acc[i, j] = A[i, j]
        for i, j in T.Parallel(4, 8):
            if i < rows:
                B[i, j] = acc[i, j] * 2
            B[i, j] = T.if_then_else(i < rows, acc[i, j], B[i, j])


def test_read_before_any_write_names_tile_element_and_line():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros_like(a)
    msg = _raises(lambda: rows_then_all(a, b, 0), "acc[0, 0]", "fragment tile acc",
                  "READ-ALL")
    assert "read before it is written" in msg


def test_partly_written_tile_names_the_first_unwritten_element():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros_like(a)
    _raises(lambda: rows_then_all(a, b, 3), "acc[3, 0]", "READ-ALL")
    rows_then_all(a, b, 4)                  # every element written: runs
    np.testing.assert_array_equal(b, 2 * a)


def test_masked_lanes_neither_write_nor_read():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.full_like(a, -1)
    rows_then_rows(a, b, 2)                 # only the lanes that ran read what they wrote
    np.testing.assert_array_equal(b[:2], a[:2])
    np.testing.assert_array_equal(b[2:], -1)


@tilejit.kernel
def gemm_into(A, B, C, clear: T.constexpr, clear_accum: T.constexpr):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), T.float16)
        B_s = T.alloc_shared((16, 16), T.float16)
        C_f = T.alloc_fragment((16, 16), T.float32)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        if clear:
            T.clear(C_f)
        T.gemm(A_s, B_s, C_f, clear_accum=clear_accum)  # GEMM-LINE
        T.copy(C_f, C[0, 0])


def test_gemm_accumulating_into_an_unwritten_tile():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    _raises(lambda: gemm_into(a, b, c, False, False), "C_f[0, 0]", "fragment tile C_f",
            "GEMM-LINE")
    ref = a.astype(np.float32) @ b.astype(np.float32)
    for clear, clear_accum in ((True, False), (False, True)):
        c[:] = 0
        gemm_into(a, b, c, clear, clear_accum)
        np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


@tilejit.kernel
def gemm_unwritten_operand(A, C):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), T.float16)
        B_s = T.alloc_shared((16, 16), T.float16)
        C_f = T.alloc_fragment((16, 16), T.float32)
        T.copy(A[0, 0], A_s)
        T.clear(C_f)
        T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[0, 0])


def test_gemm_reads_its_operands():
    a = np.ones((16, 16), np.float16)
    _raises(lambda: gemm_unwritten_operand(a, np.zeros((16, 16), np.float32)),
            "B_s[0, 0]", "shared tile B_s", "T.gemm(A_s, B_s, C_f)")


@tilejit.kernel
def row_max(A, M, clear: T.constexpr, fill: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((4, 8), T.float32)
        m = T.alloc_fragment((4,), T.float32)
        T.copy(A[0, 0], x)
        if fill:
            T.fill(m, -T.infinity(T.float32))
        T.reduce_max(x, m, dim=1, clear=clear)  # REDUCE-LINE
        T.copy(m, M[0])


def test_reduction_without_clear_reads_its_destination():
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    m = np.zeros(4, np.float32)
    _raises(lambda: row_max(a, m, False, False), "m[0]", "fragment tile m", "REDUCE-LINE")
    for clear, fill in ((True, False), (False, True)):
        m[:] = 0
        row_max(a, m, clear, fill)
        np.testing.assert_array_equal(m, a.max(axis=1))


@tilejit.kernel
def sum_of_half(A, S):
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((4, 8), T.float32)
        s = T.alloc_fragment((4,), T.float32)
        for i, j in T.Parallel(4, 8):
            if j < 4:
                x[i, j] = A[i, j]
        T.reduce_sum(x, s, dim=1)  # SUM-LINE
        T.copy(s, S[0])


def test_reduction_reads_its_whole_source():
    a = np.ones((4, 8), np.float32)
    _raises(lambda: sum_of_half(a, np.zeros(4, np.float32)), "x[0, 4]", "SUM-LINE")


@tilejit.kernel
def histogram(Idx, H, clear: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        h = T.alloc_shared((8,), T.int32)
        if clear:
            T.clear(h)
        for i in T.Parallel(32):
            T.atomic_add(h[Idx[i]], 1)  # ATOMIC-LINE
        T.copy(h, H[0])


def test_atomic_reads_its_destination():
    idx = (np.arange(32) % 8).astype(np.int32)
    h = np.zeros(8, np.int32)
    _raises(lambda: histogram(idx, h, False), "h[0]", "shared tile h", "ATOMIC-LINE")
    histogram(idx, h, True)
    np.testing.assert_array_equal(h, np.full(8, 4))


@tilejit.kernel
def copy_out(A, B):
    M = A.shape[0]
    with T.Kernel(1, threads=128) as bx:
        t = T.alloc_shared((8,), T.float32)
        for i in T.Parallel(8):
            if i < M:
                t[i] = A[i] + 1
        T.copy(t, B[0:8])  # COPY-LINE


def test_copy_reads_only_what_lands_in_the_destination():
    a = np.arange(5, dtype=np.float32)
    b = np.zeros(5, np.float32)
    copy_out(a, b)          # t[5:] is never written, and never lands in B (5 elements)
    np.testing.assert_array_equal(b, a + 1)
    a8 = np.arange(8, dtype=np.float32)
    b6 = np.zeros(6, np.float32)
    copy_out(a8, b6)        # t[6:] is written, but only t[:6] is copied
    np.testing.assert_array_equal(b6, a8[:6] + 1)
    _raises(lambda: copy_out(a, np.zeros(7, np.float32)), "t[5]", "COPY-LINE")


@tilejit.kernel
def local_pair(A, B):
    with T.Kernel(1, threads=32) as bx:
        x = T.alloc_local((2,), T.float32)
        x[0] = A[0]
        B[0] = x[0] + x[1]  # LOCAL-LINE


def test_local_tile_element_read_before_written():
    _raises(lambda: local_pair(np.ones(2, np.float32), np.zeros(1, np.float32)),
            "x[1]", "local tile x", "LOCAL-LINE")


@T.macro
def store(t, B):
    T.copy(t, B)  # MACRO-LINE


@tilejit.kernel
def uses_macro(B):
    with T.Kernel(1, threads=32) as bx:
        tmp = T.alloc_shared((8,), T.float32)
        store(tmp, B)


def test_read_in_a_macro_names_the_macro_line():
    _raises(lambda: uses_macro(np.zeros(8, np.float32)), "tmp[0]", "shared tile tmp",
            "MACRO-LINE")


@tilejit.kernel
def accumulate_into_empty(X, block: T.constexpr = 64):
    """Atomics into T.empty's memory (DeepSeek's sparse MLA backward does this with its
    dKV): torch.empty's memory holds garbage on the GPU, so the first atomic reads it."""
    Out = T.empty((block,), T.float32)
    with T.Kernel(2, threads=block) as bx:
        for i in T.Parallel(block):
            T.atomic_add(Out[i], X[bx, i])
    return Out


@tilejit.kernel
def write_then_accumulate(X, block: T.constexpr = 64):
    Out = T.empty((block,), T.float32)
    with T.Kernel(1, threads=block) as bx:
        for i in T.Parallel(block):
            Out[i] = 0.0
        for i in T.Parallel(block):
            T.atomic_add(Out[i], X[0, i])
    return Out


def test_an_atomic_into_an_unwritten_output_of_t_empty():
    x = np.ones((2, 64), np.float32)
    with pytest.raises(UninitializedReadError, match=r"Out\[0\] is read before it is written "
                                                     r"\(output Out, allocated "
                                                     r"uninitialized \(T.empty"):
        accumulate_into_empty(x)
    np.testing.assert_array_equal(write_then_accumulate(x), np.ones(64, np.float32))


def test_an_out_idx_output_read_before_it_is_written():
    """TileLang's out_idx outputs are torch.empty's memory, as T.empty's are: reading one
    before writing it is an error in the simulator (on the GPU it reads garbage); passed
    by the caller, the same tensor is the caller's values."""
    import torch

    @T.prim_func
    def accumulate(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = B[i] + A[i]

    kernel = tilejit.compile(accumulate, out_idx=[1], target="sim")
    with pytest.raises(UninitializedReadError, match=r"B\[0\] is read before it is written "
                                                     r"\(output B, allocated uninitialized "
                                                     r"\(T.empty, out_idx: torch.empty\)"):
        kernel(torch.ones(128))
    B = torch.full((128,), 2.0)
    kernel(torch.ones(128), B)
    assert B.tolist() == [3.0] * 128

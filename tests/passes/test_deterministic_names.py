"""Names the passes generate are numbered per compilation (``PassContext.number``): the
same kernel compiles to the same program, LLVM IR and PTX whatever the process compiled
before it (no GPU needed)."""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as T


@tilejit.kernel
def row_sums(A, B, bm: T.constexpr = 64, bk: T.constexpr = 32):
    """Two pipelined loops: each gets its own generated names (trip count, prologue
    index, stage counters)."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        A_s = T.alloc_shared((bm, bk), A.dtype)
        acc = T.alloc_fragment((bm, bk), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            T.copy(A[bx * bm, k * bk], A_s)
            for i, j in T.Parallel(bm, bk):
                acc[i, j] += A_s[i, j]
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
            T.copy(A[bx * bm, k * bk], A_s)
            for i, j in T.Parallel(bm, bk):
                acc[i, j] += A_s[i, j]
        T.copy(acc, B[bx * bm, 0])


@tilejit.kernel
def other(A, B, bm: T.constexpr = 64, bk: T.constexpr = 32):
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        A_s = T.alloc_shared((bm, bk), A.dtype)
        acc = T.alloc_fragment((bm, bk), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            T.copy(A[bx * bm, k * bk], A_s)
            for i, j in T.Parallel(bm, bk):
                acc[i, j] = T.max(acc[i, j], A_s[i, j])
        T.copy(acc, B[bx * bm, 0])


def _compile(kernel, directory, monkeypatch, arch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(directory))
    a = np.zeros((256, 256), np.float16)
    b = np.zeros((256, 32), np.float32)
    compiled = kernel.compile(a, b, target="cuda", arch=arch)
    (dump,) = [p for p in directory.iterdir() if p.is_dir()]
    return compiled, {p.name: p.read_text() for p in dump.iterdir()}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])     # cp.async and TMA pipelines
def test_same_kernel_same_names_after_another_compile(tmp_path, monkeypatch, arch):
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    first, first_files = _compile(row_sums, tmp_path / "first", monkeypatch, arch)
    _compile(other, tmp_path / "between", monkeypatch, arch)
    again, again_files = _compile(row_sums, tmp_path / "again", monkeypatch, arch)
    (program,) = [text for name, text in first_files.items()
                  if name.endswith("_after_pipeline_loops.py")]
    assert "__tj_n1 " in program and "__tj_n2 " in program, program
    assert sorted(first_files) == sorted(again_files)
    for name, text in first_files.items():
        assert _numba_uid(again_files[name]) == _numba_uid(text), name
    assert _numba_uid(again.llvm_ir) == _numba_uid(first.llvm_ir)
    assert again.ptx == first.ptx


def _numba_uid(text):
    """Numba numbers every function it compiles in a process (``FunctionIdentity``'s
    uid): ``row_sums$3`` names the lowered module, and the mangled name's ``B2v3B``
    tag survives in the optimized IR only in block labels inlining made (not in PTX)."""
    return re.sub(r"B\d+v\d+B", "B_vB", re.sub(r"\$\d+\"", '$"', text))

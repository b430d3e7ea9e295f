"""The JIT around the compiler: T.empty outputs, automatic shape specialization, IR
dumps, compile-only use without Numba on the cache-hit path."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@tilejit.kernel
def add_new(A, B, block: T.constexpr = 256):
    N = A.shape[0]
    C = T.empty((N,), A.dtype)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            k = bx * block + i
            if k < N:
                C[k] = A[k] + B[k]
    return C


@tilejit.kernel
def split(X):
    M, N = X.shape
    pos = T.empty((M, N), T.float32)
    neg = T.empty((M, N), T.float32)
    with T.Kernel(M, threads=32) as row:
        for j in T.Parallel(32):
            if j < N:
                pos[row, j] = T.max(X[row, j], 0)
                neg[row, j] = T.min(X[row, j], 0)
    return pos, neg


@tilejit.kernel
def row_scale(X, Y):
    M, D = X.shape
    with T.Kernel(M, threads=64) as row:
        for j in T.Parallel(D):          # D is a compile-time extent: specialized on it
            Y[row, j] = X[row, j] * (j + 1)


def test_empty_output_numpy():
    a = np.arange(1000, dtype=np.float32)
    c = add_new(a, a)
    assert isinstance(c, np.ndarray) and c.dtype == np.float32 and c.shape == (1000,)
    np.testing.assert_array_equal(c, 2 * a)


def test_empty_outputs_torch_tuple():
    torch = pytest.importorskip("torch")
    x = torch.randn(5, 20)
    pos, neg = split(x)
    assert isinstance(pos, torch.Tensor) and pos.shape == (5, 20)
    torch.testing.assert_close(pos, x.clamp(min=0))
    torch.testing.assert_close(neg, x.clamp(max=0))


def test_empty_output_bfloat16_needs_torch():
    torch = pytest.importorskip("torch")
    a = torch.randn(300).to(torch.bfloat16)
    c = add_new(a, a)
    assert c.dtype == torch.bfloat16
    torch.testing.assert_close(c, a + a)


def test_empty_output_in_ptx_is_a_parameter():
    a = np.zeros(1000, np.float32)
    ptx = add_new.compile(a, a, target="cuda", arch="sm_90").ptx
    assert ptx.count(".param .u64 .ptr") == 3


def test_shape_entry_used_as_extent_specializes():
    x = np.random.default_rng(0).standard_normal((7, 48)).astype(np.float32)
    y = np.zeros_like(x)
    row_scale(x, y)
    np.testing.assert_allclose(y, x * np.arange(1, 49, dtype=np.float32))
    assert row_scale.shape_entries == (("X", 1),)
    a = np.zeros((3, 64), np.float32)
    ptx64 = row_scale.compile(a, a.copy(), target="cuda", arch="sm_90").ptx
    b = np.zeros((9, 64), np.float32)            # other rows, same D: same code
    assert row_scale.compile(b, b.copy(), target="cuda", arch="sm_90").ptx == ptx64
    c = np.zeros((3, 32), np.float32)            # another D: another specialization
    assert row_scale.compile(c, c.copy(), target="cuda", arch="sm_90").ptx != ptx64


@tilejit.kernel
def scale_columns(X, W, Y):
    M, N = X.shape
    with T.Kernel(M, threads=64) as row:
        x = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_fragment((N,), T.float32)
        T.copy(X[row, 0], x)
        T.copy(W, w)                    # W moved whole: specialized on its length
        for i, j in T.Parallel(1, N):
            x[i, j] = x[i, j] * w[j]
        T.copy(x, Y[row, 0])


def test_whole_tensor_copy_specializes_on_the_tensors_shape():
    assert scale_columns.whole_copies == ("W",)
    x = np.zeros((4, 256), np.float32)
    ptx = scale_columns.compile(x, np.zeros(256, np.float32), x.copy(), target="cuda",
                                arch="sm_90").ptx
    # W's length is compiled in: its copy has no edge path (no element-by-element loads)
    assert not re.search(r"ld\.global\.nc\.b32\s", ptx) and "ld.global.nc.v4.b32" in ptx


def test_whole_tensor_copy_of_another_extent_is_an_error_before_running():
    x = np.zeros((4, 256), np.float32)
    with pytest.raises(tilejit.CompileError, match=r"tensor 'W' has shape \(201,\) and tile "
                       r"'w' has shape \(256,\)"):
        scale_columns.compile(x, np.zeros(201, np.float32), x.copy(), target="cuda",
                              arch="sm_90")
    with pytest.raises(tilejit.CompileError, match="tensor 'W' has shape"):
        scale_columns(x, np.zeros(201, np.float32), x.copy())       # simulated: the same


@tilejit.kernel
def scale_columns_2d(X, W, Y):
    M, N = X.shape
    with T.Kernel(M, threads=64) as row:
        x = T.alloc_fragment((1, N), T.float32)
        w = T.alloc_fragment((1, N), T.float32)     # W is (N,): size-1 dimensions aside
        T.copy(X[row, 0], x)
        T.copy(W, w)
        for i, j in T.Parallel(1, N):
            x[i, j] = x[i, j] * w[i, j]
        T.copy(x, Y[row, 0])


def test_whole_tensor_copy_pairs_extents_without_size_one_dimensions():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    y = np.zeros_like(x)
    scale_columns_2d(x, w, y)
    np.testing.assert_allclose(y, x * w, rtol=1e-6)
    assert "ld.global.nc.v4.b32" in scale_columns_2d.compile(x, w, y, target="cuda",
                                                             arch="sm_90").ptx
    with pytest.raises(tilejit.CompileError, match="tensor 'W' has shape"):
        scale_columns_2d(x, np.zeros(128, np.float32), y)


def test_whole_tensor_copy_simulated():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    y = np.full_like(x, np.nan)
    scale_columns(x, w, y)
    np.testing.assert_allclose(y, x * w, rtol=1e-6)


@pytest.mark.gpu
def test_whole_tensor_copy_on_gpu():
    torch = pytest.importorskip("torch")
    x = torch.randn(37, 256, device="cuda")
    w = torch.randn(256, device="cuda")
    y = torch.full_like(x, float("nan"))
    scale_columns(x, w, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * w)
    y_sim = torch.full_like(x, float("nan")).cpu()
    tilejit.kernel(scale_columns.func, target="sim")(x.cpu(), w.cpu(), y_sim)
    torch.testing.assert_close(y.cpu(), y_sim)


def test_other_shape_entries_stay_runtime():
    assert add_new.shape_entries == ()
    a = np.zeros(1000, np.float32)
    b = np.zeros(5000, np.float32)
    assert add_new.compile(a, a, target="cuda", arch="sm_90").ptx == \
        add_new.compile(b, b, target="cuda", arch="sm_90").ptx


def test_dump_ir_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    a = np.zeros(1000, np.float32)
    add_new.compile(a, a, target="cuda", arch="sm_80", block=128)
    (directory,) = tmp_path.iterdir()
    names = sorted(p.name for p in directory.iterdir())
    # the source, the device program, one file after each pass in the pipeline's order
    # (compiler/pipeline.SOURCE_PASSES), then the plan, Numba's types, LLVM IR and PTX
    from tilejit.compiler.pipeline import SOURCE_PASSES
    steps = ["source.py", "device_program.py"] + [
        f"after_{p.__name__}.py" for p in SOURCE_PASSES] + [
        "tile_plan.txt", "numba_typed.txt", "llvm_lowered.ll", "llvm_optimized.ll",
        "kernel.ptx"]
    assert names == [f"{k:02d}_{step}" for k, step in enumerate(steps)]
    assert "after_pipeline_loops.py" in steps and "after_allocate_tiles.py" in steps
    guards = names[steps.index("after_version_parallel_guards.py")]
    assert "__tj_parallel_groups" in (directory / guards).read_text()
    assert ".entry add_new_kernel" in (directory / names[-1]).read_text()


def test_import_does_not_load_numba():
    code = "import sys, tilejit; assert 'numba' not in sys.modules, 'numba imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr


@pytest.mark.gpu
def test_outputs_and_specialization_on_gpu():
    import torch
    for n in (1000, 4096, 1000):          # the second 1000 takes the fast path
        a = torch.randn(n, device="cuda")
        c = add_new(a, a)
        assert c.is_cuda and c.shape == (n,)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + a, rtol=0, atol=0)
    x = torch.randn(6, 20, device="cuda")
    pos, neg = split(x)
    pos2, neg2 = split(x)                 # fast path: new outputs each call
    assert pos2.data_ptr() != pos.data_ptr()
    torch.testing.assert_close(pos2, x.clamp(min=0))
    torch.testing.assert_close(neg2, x.clamp(max=0))
    for d in (48, 64, 48):
        x = torch.randn(5, d, device="cuda")
        y = torch.zeros_like(x)
        row_scale(x, y)
        torch.cuda.synchronize()
        ref = x * torch.arange(1, d + 1, device="cuda", dtype=torch.float32)
        torch.testing.assert_close(y, ref)
        ys = torch.zeros(5, d)
        row_scale(x.cpu(), ys)
        torch.testing.assert_close(y.cpu(), ys)


@tilejit.kernel
def maybe_write(A, B=None):
    with T.Kernel(T.ceildiv(A.shape[0], 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < A.shape[0]:
                A[bx * 128 + i] = A[bx * 128 + i] + 1.0
                if B is not None:
                    B[bx * 128 + i] = A[bx * 128 + i] * 2.0


def test_an_optional_tensor_left_out_is_a_compile_time_none():
    a = np.zeros(300, np.float32)
    maybe_write(a)
    assert (a == 1).all()
    b = np.zeros(300, np.float32)
    maybe_write(a, b)
    assert (a == 2).all() and (b == 4).all()
    assert "st.global" in maybe_write.compile(a, target="cuda", arch="sm_90").ptx

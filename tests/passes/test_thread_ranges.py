"""Tile operations on shared tiles and tensors under a branch that a range of threads
takes, as TileLang's mask tests write them (``if tx < 128: T.copy(A[...], A_shared)``):
done by those threads (passes/thread_ranges.py), with the block barrier after the branch
(passes/barriers.py), in the simulator and on the GPU."""
import ast

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def _kernel(form):
    @tilejit.kernel
    def masked(A, B, block_M: T.constexpr = 64, block_N: T.constexpr = 64):
        with T.Kernel(T.ceildiv(A.shape[1], block_N), T.ceildiv(A.shape[0], block_M),
                      threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), A.dtype)
            tx = T.get_thread_binding(0)
            if form == "copy":
                if tx < 128:
                    T.copy(A[by * block_M, bx * block_N], A_shared)
            elif form == "copy_range":
                if 128 <= tx < 256:
                    T.copy(A[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                           A_shared)
            elif form == "parallel":
                if tx < 128:
                    for i, k in T.Parallel(block_M, block_N):
                        A_shared[i, k] = A[by * block_M + i, bx * block_N + k] * 2
            elif form == "parallel_range":
                if tx >= 128 and tx < 256:
                    for i, k in T.Parallel(block_M, block_N):
                        A_shared[i, k] = A[by * block_M + i, bx * block_N + k] * 2
            elif form == "direct":
                if T.get_thread_binding(0) < 64:
                    T.copy(A[by * block_M, bx * block_N], A_shared)
            elif form == "else":
                if tx < 64:
                    T.fill(A_shared, 1)
                else:
                    T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(A_shared, B[by * block_M, bx * block_N])
    return masked


FORMS = ("copy", "copy_range", "parallel", "parallel_range", "direct", "else")
KERNELS = {f: _kernel(f) for f in FORMS}


def _case(form):
    rng = np.random.default_rng(FORMS.index(form))
    # the copies' tiles run past the tensor's edges (100 x 130): read as 0, not written
    shape = (128, 192) if form.startswith("parallel") else (100, 130)
    a = rng.standard_normal(shape).astype(np.float32)
    want = a * 2 if form.startswith("parallel") else a
    return a, want


@pytest.mark.parametrize("form", FORMS)
def test_simulator(form):
    a, want = _case(form)
    b = np.zeros_like(a)
    KERNELS[form](a, b)
    np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("form", FORMS)
def test_ptx_assembles_with_no_barrier_inside_the_branch(form, arch, ptxas, tmp_path,
                                                          monkeypatch):
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    a, _ = _case(form)
    ptx = KERNELS[form].compile(a, np.zeros_like(a), target="cuda", arch=arch).ptx
    ptxas(ptx, arch)
    (program,) = tmp_path.glob("*/*after_insert_barriers.py")
    tree = ast.parse(program.read_text())
    branches = [n for n in ast.walk(tree) if isinstance(n, ast.If)
                and ("tx" in ast.unparse(n.test) or "__tj_thread_index" in ast.unparse(n.test))]
    assert branches
    for branch in branches:
        assert "__tj_sync" not in ast.unparse(branch), ast.unparse(branch)
        assert "T.copy" not in ast.unparse(branch) and "T.Parallel" not in ast.unparse(branch)


@tilejit.kernel
def fragment_under_a_range(A, B):
    with T.Kernel(1, threads=256) as bx:
        F = T.alloc_fragment((64, 64), T.float32)
        tx = T.get_thread_binding(0)
        if tx < 128:
            T.copy(A, F)
        T.copy(F, B)


def test_a_fragment_under_a_range_is_an_error_on_both_targets():
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(CompileError, match=r"T.copy inside a branch .* threads 0…127"):
        fragment_under_a_range.compile(a, a.copy(), target="cuda", arch="sm_90a")
    with pytest.raises(Exception, match="T.copy inside a branch that depends on the thread"):
        fragment_under_a_range(a, a.copy())


@pytest.mark.gpu
@pytest.mark.parametrize("form", FORMS)
def test_gpu_matches_simulator_and_numpy(form):
    import torch
    a, want = _case(form)
    b_sim = np.zeros_like(a)
    KERNELS[form](a, b_sim)
    b = torch.zeros(a.shape, device="cuda")
    KERNELS[form](torch.from_numpy(a).cuda(), b)
    np.testing.assert_array_equal(b.cpu().numpy(), b_sim)
    np.testing.assert_array_equal(b_sim, want)


@tilejit.kernel
def parallel_on_a_fragment_under_a_range(A, B):
    with T.Kernel(1, threads=256) as bx:
        F = T.alloc_fragment((64, 64), T.float32)
        T.copy(A, F)
        tx = T.get_thread_binding(0)
        if tx < 128:
            for i, j in T.Parallel(64, 64):
                F[i, j] = F[i, j] * 2
        T.copy(F, B)


def test_a_parallel_on_a_fragment_under_a_range_is_an_error_on_both_targets():
    a = np.ones((64, 64), np.float32)
    with pytest.raises(CompileError, match=r"T.Parallel inside a branch .* threads 0…127"):
        parallel_on_a_fragment_under_a_range.compile(a, a.copy(), target="cuda",
                                                     arch="sm_90a")
    with pytest.raises(Exception, match=r"T.Parallel inside a branch that depends on the "
                                        r"thread index"):
        parallel_on_a_fragment_under_a_range(a, a.copy())

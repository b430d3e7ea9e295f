"""Python before `with T.Kernel(...)`, as TileLang's examples write it (the grouped GEMM's
`sum(... for size in batch_sizes_list)`, the warp-specialized GEMM's
`[128, 128] * num_stages`, NSA's `q_shape = [batch, ...]`): folded at compile time when
it depends only on compile-time values (frontend/static_prologue.py); in simulation
against numpy, PTX assembled by ptxas, on the GPU against torch and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.jit
def grouped_rows(A, sizes_list, block=32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    out = T.empty((M, N), T.float32)
    total_blocks = sum((s + block - 1) // block for s in sizes_list)
    offsets = [sum(sizes_list[:i]) for i in range(len(sizes_list))]
    scale = [1.0, 2.0] * 2
    with T.Kernel(total_blocks, threads=128) as bx:
        for i, j in T.Parallel(block, N):
            r = bx * block + i
            if r < M:
                out[r, j] = A[r, j] * scale[bx % 4] + offsets[1]
    return out


@tilejit.jit
def rows_from_a_runtime_list(A):
    M = T.dynamic("M")
    A: T.Tensor((M,), T.float32)
    out = T.empty((M,), T.float32)
    twice = sum(2 for _ in range(M))      # over a run-time range: not unrolled
    with T.Kernel(1, threads=32) as bx:
        out[0] = A[0] * twice
    return out


def _reference(a, sizes, block=32):
    scale = np.array([1.0, 2.0, 1.0, 2.0])[np.arange(a.shape[0]) // block % 4]
    return a.astype(np.float64) * scale[:, None] + sizes[0]


def test_compile_time_python_in_the_prologue_runs_in_simulation():
    a = np.random.default_rng(0).standard_normal((100, 16)).astype(np.float32)
    np.testing.assert_allclose(grouped_rows(a, [40, 60]), _reference(a, [40, 60]), rtol=1e-6)
    np.testing.assert_allclose(grouped_rows(a, (70, 30)), _reference(a, [70, 30]), rtol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_it_is_folded_into_constants_for_the_gpu(arch, ptxas):
    a = np.zeros((100, 16), np.float32)
    ptx = grouped_rows.compile(a, [40, 60], target="cuda", arch=arch).get_kernel_source()
    ptxas(ptx, arch)


def test_python_over_run_time_values_is_still_an_error_at_its_line():
    with pytest.raises(CompileError, match=r"unsupported in a kernel: a generator expression "
                                           r"\(a statement "
                                           r"before `with T.Kernel\(...\)` may use one when "
                                           r"it depends only on compile-time values") as e:
        rows_from_a_runtime_list.compile(np.zeros(8, np.float32), target="cuda",
                                         arch="sm_90a").get_kernel_source()
    assert "twice = sum(2 for _ in range(M))" in str(e.value)
    with pytest.raises(CompileError, match="a generator expression"):
        rows_from_a_runtime_list(np.zeros(8, np.float32))        # the simulator too


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)
    got = grouped_rows(torch.from_numpy(a).cuda(), [100, 150, 50])
    sim = grouped_rows(a, [100, 150, 50])
    np.testing.assert_allclose(got.cpu().numpy(), _reference(a, [100]), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got.cpu().numpy(), sim)


n_rows = 8          # a module global with the name of a run-time parameter below


@tilejit.kernel
def half_of_a_runtime_value(A, n_rows):
    half = n_rows // 2
    with T.Kernel(1, threads=32) as bx:
        A[0] = half


def test_a_run_time_parameter_is_not_folded_from_a_global_of_its_name():
    a = np.zeros(1, np.float32)
    half_of_a_runtime_value(a, 20)
    assert a[0] == 10
    ptx = half_of_a_runtime_value.compile(a, 20, target="cuda", arch="sm_90a").ptx
    assert "0f40800000" not in ptx          # 4.0: the global's 8 // 2, folded


@pytest.mark.gpu
def test_a_run_time_parameter_on_the_gpu():
    import torch
    a = torch.zeros(1, device="cuda")
    half_of_a_runtime_value(a, 20)
    assert a.item() == 10


@tilejit.kernel
def bounds_of(A, sizes: T.constexpr):
    offsets = [0] + sizes           # a list passed as a compile-time value stays a list here
    ends = sizes + [0]
    with T.Kernel(1, threads=32) as bx:
        for i in T.serial(4):
            A[i] = offsets[i] * 10 + ends[i]


def test_a_compile_time_list_concatenates_with_lists():
    a = np.zeros(4, np.int32)
    bounds_of(a, [1, 2, 3])
    assert a.tolist() == [1, 12, 23, 30]
    ptx = bounds_of.compile(a, [1, 2, 3], target="cuda", arch="sm_90a").ptx
    assert ".entry" in ptx


@pytest.mark.gpu
def test_a_compile_time_list_on_the_gpu():
    import torch
    a = torch.zeros(4, dtype=torch.int32, device="cuda")
    bounds_of(a, [1, 2, 3])
    assert a.tolist() == [1, 12, 23, 30]

"""TileLang's ``T.__ldg(x[i])`` / ``T.__ldg(x, i)`` (CUDA's read-only-cache load): the
load ``x[i]`` in the simulator and on the GPU path, whose PTX loads the read-only,
unaliased tensor with ``ld.global.nc``; malformed calls are CompileErrors at the line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def gather(X, idx, Y):
    n = Y.shape[0]
    with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < n:
                j = T.__ldg(idx[bx * 128 + i])
                Y[bx * 128 + i] = T.__ldg(X, j) * 2.0 + T.__ldg(X, [j])


def _twice(x, i):
    """A helper compiled as a device function (no tile operations): T.__ldg typed there."""
    return T.__ldg(x[i]) + T.__ldg(x, i)


@T.macro
def _store(X, Y, i):
    Y[i] = T.__ldg(X, i) + 1.0


@tilejit.kernel
def scatter(X, idx, Z, Y):
    """T.__ldg in an expression statement (an atomic's index and value), in a helper and
    in a macro."""
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            T.atomic_add(Z[T.__ldg(idx[i])], T.__ldg(X[i]))
            Y[i] = _twice(X, i)
        _store(X, Y, 0)


def test_in_expression_statements_helpers_and_macros():
    x = np.arange(128, dtype=np.float32)
    idx = (np.arange(128) % 4).astype(np.int32)
    z = np.zeros(4, np.float32)
    y = np.zeros(128, np.float32)
    tilejit.kernel(scatter.func, target="sim")(x, idx, z, y)
    np.testing.assert_array_equal(z, [x[idx == j].sum() for j in range(4)])
    expected = 2 * x
    expected[0] = x[0] + 1.0
    np.testing.assert_array_equal(y, expected)
    ptx = scatter.compile(x, idx, z, y, target="cuda", arch="sm_90a").ptx
    assert "atom.global.add.f32" in ptx


def _data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(500).astype(np.float32)
    idx = rng.integers(0, 500, 1000).astype(np.int32)
    return x, idx


def test_it_is_the_load_in_the_simulator():
    x, idx = _data()
    y = np.zeros(1000, np.float32)
    tilejit.kernel(gather.func, target="sim")(x, idx, y)
    np.testing.assert_array_equal(y, x[idx] * 3.0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_read_only_tensors_load_through_the_non_coherent_path(arch, ptxas):
    x, idx = _data()
    ptx = gather.compile(x, idx, np.zeros(1000, np.float32), target="cuda", arch=arch).ptx
    assert ptx.count("ld.global.nc") >= 2
    ptxas(ptx, arch)


@pytest.mark.parametrize("call, message", [
    ("T.__ldg(X)", r"T.__ldg\(x\[i\]\) loads one element: got `X`"),
    ("T.__ldg(X, 0, 1)", r"T.__ldg\(x\[i\]\) or T.__ldg\(x, index\): one load")])
def test_malformed_calls_are_errors_at_their_line(call, message, tmp_path):
    source = tmp_path / "k.py"
    source.write_text(f'''import tilejit
import tilejit.language as T


@tilejit.kernel
def k(X, Y):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            Y[i] = {call}
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_ldg", source)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(CompileError, match=message) as info:
        spec.loader.exec_module(module)
    assert "line 9" in str(info.value)


@pytest.mark.gpu
def test_on_the_gpu_against_numpy():
    import torch
    x, idx = _data()
    y = torch.zeros(1000, device="cuda")
    gather(torch.from_numpy(x).cuda(), torch.from_numpy(idx).cuda(), y)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), x[idx] * 3.0)

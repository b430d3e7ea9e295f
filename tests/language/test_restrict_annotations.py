"""TileLang's ``T.annotate_restrict_buffers(x, y)``: the tensors named may alias, so
their entry parameters are not ``noalias`` (the others stay so), on sm_80, sm_90a and
AMDGPU alike; the statement is taken out before anything runs (the simulator's results
are those of the kernel without it); names that are not tensor parameters, and the
statement under an ``if``, are CompileErrors at the line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def add(x, y, z):
    T.annotate_restrict_buffers(x, y)
    n = x.shape[0]
    with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < n:
                y[bx * 128 + i] = x[bx * 128 + i] + z[bx * 128 + i]


@tilejit.kernel
def add_inside(x, y, z):
    n = x.shape[0]
    with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
        T.annotate_restrict_buffers(y)
        for i in T.Parallel(128):
            if bx * 128 + i < n:
                y[bx * 128 + i] = x[bx * 128 + i] + z[bx * 128 + i]


def _params(kernel, arch="sm_90a"):
    a = np.zeros(1000, np.float32)
    target = "amdgpu" if arch.startswith("gfx") else "cuda"
    ir = kernel.compile(a, a.copy(), a.copy(), target=target, arch=arch).compiled.llvm_ir
    define = next(line for line in ir.splitlines() if line.startswith("define"))
    return [("noalias" in p) for p in define.split("(", 1)[1].split(",") if "ptr" in p]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "gfx942"])
def test_the_named_tensors_are_not_noalias(arch):
    assert _params(add, arch) == [False, False, True]
    assert _params(add_inside, arch) == [True, False, True]


def test_the_simulator_runs_the_kernel_as_without_it():
    x = np.arange(1000, dtype=np.float32)
    z = np.ones(1000, np.float32)
    y = np.zeros(1000, np.float32)
    tilejit.kernel(add.func, target="sim")(x, y, z)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize("body, message", [
    ("T.annotate_restrict_buffers(x, n)",
     r"expected tensor parameters of the kernel, got `n`"),
    ("T.annotate_restrict_buffers(x, flag)",
     r"expected tensor parameters of the kernel, got `flag`"),
    ("if flag:\n        T.annotate_restrict_buffers(x)",
     r"not under an `if` or a loop")])
def test_bad_uses_are_errors_at_their_line(body, message, tmp_path):
    source = tmp_path / "k.py"
    source.write_text(f'''import tilejit
import tilejit.language as T


@tilejit.kernel
def k(x, y, flag: T.constexpr = True):
    n = x.shape[0]
    {body}
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            y[i] = x[i]
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_restrict", source)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(CompileError, match=message) as info:
        spec.loader.exec_module(module)
    assert "line 8" in str(info.value) or "line 9" in str(info.value)


def test_run_on_the_host_it_does_nothing():
    """A program's prologue (the host code before its launches) runs as Python."""
    assert T.annotate_restrict_buffers() is None


@T.macro
def _aliasing(x, y):
    T.annotate_restrict_buffers(x, y)


@tilejit.kernel
def add_macro(x, y, z):
    _aliasing(x, y)
    n = x.shape[0]
    with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < n:
                y[bx * 128 + i] = x[bx * 128 + i] + z[bx * 128 + i]


@tilejit.kernel
def two_launches(x, y, z):
    """A program of two launches through a global scratch tensor, its prologue on the
    host: the annotation holds for each launch."""
    T.annotate_restrict_buffers(x, y)
    tmp = T.alloc_global((1000,), "float32")
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < 1000:
                tmp[bx * 128 + i] = x[bx * 128 + i] + z[bx * 128 + i]
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < 1000:
                y[bx * 128 + i] = tmp[bx * 128 + i] * 2.0


def test_in_a_macro_and_in_a_program_of_two_launches():
    assert _params(add_macro) == [False, False, True]
    a = np.arange(1000, dtype=np.float32)
    two_launches.compile(a, a.copy(), a.copy(), target="cuda", arch="sm_90a")
    y = np.zeros(1000, np.float32)
    tilejit.kernel(two_launches.func, target="sim")(a, y, np.ones(1000, np.float32))
    np.testing.assert_array_equal(y, 2 * (a + 1))


@tilejit.kernel
def shift(y, x):
    T.annotate_restrict_buffers(x, y)
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            y[i] = x[i] + 1.0


def test_aliased_bfloat16_views_in_the_simulator():
    """The simulator computes on a copy of a bfloat16 array (ml_dtypes) and writes it
    back: a copy the kernel left alone (x, viewing y's memory) must not overwrite y."""
    import ml_dtypes
    buf = np.zeros(128, ml_dtypes.bfloat16)
    tilejit.kernel(shift.func, target="sim")(buf, buf)
    np.testing.assert_array_equal(buf.astype(np.float32), np.ones(128, np.float32))


@pytest.mark.gpu
def test_on_the_gpu_against_numpy_and_the_simulator():
    import torch
    x = torch.randn(1000, device="cuda")
    z = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    add(x, y, z)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + z)
    sim = np.zeros(1000, np.float32)
    tilejit.kernel(add.func, target="sim")(x.cpu().numpy(), sim, z.cpu().numpy())
    np.testing.assert_array_equal(y.cpu().numpy(), sim)

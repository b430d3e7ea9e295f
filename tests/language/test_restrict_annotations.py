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


def test_outside_a_kernel_it_says_what_it_is():
    with pytest.raises(RuntimeError, match="a statement of a kernel"):
        T.annotate_restrict_buffers()


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

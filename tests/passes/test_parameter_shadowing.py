"""A run-time parameter hides a module global of its name in every compile-time
evaluation (passes/static_eval.py): `def k(A, C, n)` in a module with `n = 64` loops to
the call's n, on the GPU as in the simulator (the GPU's code had taken the global's 64:
a silent miscompile found by review)."""
import numpy as np
import pytest
from kernel_files import kernel_module


def _module(tmp_path, name, global_name):
    return kernel_module(tmp_path, name,
        "import tilejit\nimport tilejit.language as T\n"
        f"{global_name} = 64\n"
        "@tilejit.kernel\n"
        "def k(A, C, n):\n"
        "    with T.Kernel(1, threads=32) as bx:\n"
        "        for i in T.Parallel(n):\n"
        "            C[i] = A[i] * 2\n")


def test_a_parameter_hides_a_global_of_its_name(tmp_path):
    a, c = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    ptx = {}
    for name, global_name in (("shadowed", "n"), ("apart", "m")):
        module = _module(tmp_path, name, global_name)
        ptx[name] = module.k.compile(a, c, 128, target="cuda", arch="sm_90a").ptx
        out = np.zeros(128, np.float32)
        module.k(a, out, 128)
        np.testing.assert_array_equal(out, a * 2)
    # the parameter is read, and the code is the one without the global
    assert "k_kernel_param_6]" in ptx["shadowed"]
    assert ptx["shadowed"] == ptx["apart"]


# every other place the front end reads a compile-time value (audited in session 65):
# a loop's extent, a static `if`, T.ceildiv/T.min, a local variable, an index, range(),
# T.Pipelined, T.unroll, the grid and the block size
SHADOWED_USES = {
    "serial": "for i in T.serial(n):\n    C[i] = A[i] * 2",
    "static if": "if n > 100:\n    for i in T.Parallel(128):\n        C[i] = A[i] * 2",
    "ceildiv": "for i in T.serial(T.ceildiv(n, 2)):\n    C[i] = A[i] * 2",
    "min": "for i in T.serial(T.min(n, 128)):\n    C[i] = A[i] * 2",
    "variable": "x = T.alloc_var('int32')\nx = n * 2\nfor i in T.serial(x // 2):\n"
                "    C[i] = A[i] * 2",
    "index": "for i in T.Parallel(128):\n    C[i] = A[(i + n) % 128] * 2",
    "range": "for i in range(n):\n    C[i] = A[i] * 2",
    "pipelined": "for i in T.Pipelined(n, num_stages=1):\n    C[i] = A[i] * 2",
    "unroll": "for i in T.unroll(n):\n    C[i] = A[i] * 2",
}


def _use_module(tmp_path, name, body, global_line="", grid="1, threads=32"):
    lines = "\n".join("        " + line for line in body.splitlines())
    return kernel_module(tmp_path, name,
        f"import tilejit\nimport tilejit.language as T\n{global_line}\n"
        "@tilejit.kernel\n"
        "def k(A, C, n):\n"
        f"    with T.Kernel({grid}) as bx:\n{lines}\n")


@pytest.mark.parametrize("use", sorted(SHADOWED_USES))
def test_every_compile_time_read_sees_the_parameter(tmp_path, use):
    a = np.arange(128, dtype=np.float32)
    body, key = SHADOWED_USES[use], use.replace(" ", "_")
    ptx, sim = [], []
    for tag, global_line in (("shadowed", "n = 0"), ("apart", "")):
        module = _use_module(tmp_path, f"{key}_{tag}", body, global_line)
        ptx.append(module.k.compile(a, a, 128, target="cuda", arch="sm_90a").ptx)
        out = np.zeros(128, np.float32)
        module.k(a, out, 128)
        sim.append(out)
    assert ptx[0] == ptx[1]
    np.testing.assert_array_equal(sim[0], sim[1])


@pytest.mark.parametrize("grid", ["n, threads=32", "1, threads=n"])
def test_the_grid_and_block_size_see_the_parameter(tmp_path, grid):
    a = np.arange(128, dtype=np.float32)
    key = "grid" if grid.startswith("n") else "threads"
    ptx = [_use_module(tmp_path, f"{key}_{tag}", "for i in T.Parallel(32):\n"
                       "    C[bx * 32 + i] = A[bx * 32 + i] * 2", line, grid).k.compile(
               a, a, 2 if key == "grid" else 64, target="cuda", arch="sm_90a").ptx
           for tag, line in (("shadowed", "n = 1 if False else 3"), ("apart", ""))]
    assert ptx[0] == ptx[1]

"""A run-time parameter hides a module global of its name in every compile-time
evaluation (passes/static_eval.py): `def k(A, C, n)` in a module with `n = 64` loops to
the call's n, on the GPU as in the simulator (the GPU's code had taken the global's 64:
a silent miscompile found by review)."""
import numpy as np
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

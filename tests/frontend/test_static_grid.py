"""frontend/static_grid.py: a launch's grid extents that the compiled kernel is keyed on
give each block index read LLVM's range [0, extent); an extent that may change while the
kernel is reused (an element of a dict, a program's function) gives none."""
import numpy as np
from kernel_files import kernel_module


def _module(tmp_path, name, extent):
    return kernel_module(tmp_path, name,
        "import tilejit\nimport tilejit.language as T\nBLOCKS = 4\n"
        "cfg = {'blocks': 2}\n"
        "def blocks():\n    return cfg['blocks']\n"
        "@tilejit.kernel\n"
        "def k(A, n: T.constexpr = 128):\n"
        f"    with T.Kernel({extent}, threads=32) as bx:\n"
        "        for i in T.Parallel(32):\n"
        "            if bx < 2:\n"
        "                A[bx * 32 + i] = 1.0\n"
        "            else:\n"
        "                A[bx * 32 + i] = 2.0\n")


def _compiled(module):
    return module.k.compile(np.zeros(128, np.float32), target="cuda", arch="sm_90a")


def test_a_keyed_extent_gives_the_block_index_its_range(tmp_path):
    for number, extent in enumerate(("BLOCKS", "T.ceildiv(n, 32)", "2 * 2", "max(4, 1)")):
        module = _module(tmp_path, f"grid_keyed{number}", extent)
        compiled = _compiled(module)
        assert "!range" in compiled.llvm_ir and "i32 0, i32 4}" in compiled.llvm_ir, extent


def test_an_extent_that_may_change_gives_no_range(tmp_path):
    """A grid read from a dict or through a function: the host computes it again at every
    call while the kernel is reused, so the device code may not assume it (with a range
    of 2, LLVM would fold `bx < 2` to true: blocks 2 and 3 would store 1.0)."""
    for number, extent in enumerate(("cfg['blocks']", "blocks()", "A.shape[0] // 32")):
        module = _module(tmp_path, f"grid_changing{number}", extent)
        compiled = _compiled(module)
        assert "!range" not in compiled.llvm_ir, extent
        assert "1065353216" in compiled.ptx and "1073741824" in compiled.ptx   # 1.0, 2.0
        module.cfg["blocks"] = 4          # (a run-time extent: 128 // 32 = 4 already)
        a = np.zeros(128, np.float32)
        module.k(a)
        np.testing.assert_array_equal(a[::32], [1, 1, 2, 2])

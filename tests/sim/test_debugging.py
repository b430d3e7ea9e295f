"""debug=True: bounds checks and T.device_assert on the device; T.print; the same
functions' meaning in the simulator."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilejit
import tilejit.language as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@tilejit.kernel(debug=True)
def checked_copy(A, B, n):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            k = bx * 128 + i
            T.device_assert(k < n, msg="k below n")
            B[k] = A[k]


@tilejit.kernel
def show(A):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(4):
            T.print(A[i + bx] * 2, msg="twice: ")


def test_debug_ptx_checks_bounds_and_asserts():
    a = np.zeros(256, np.float32)
    ptx = checked_copy.compile(a, a.copy(), 256, target="cuda", arch="sm_80").ptx
    assert "vprintf" in ptx and "trap;" in ptx
    plain = tilejit.kernel(checked_copy.func).compile(a, a.copy(), 256, target="cuda",
                                                      arch="sm_80").ptx
    assert "vprintf" not in plain and "trap" not in plain


def test_print_compiles_to_vprintf():
    ptx = show.compile(np.zeros(4, np.float16), target="cuda", arch="sm_90").ptx
    assert "vprintf" in ptx


def test_simulator_assert_and_print(capsys):
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    checked_copy(a, b, 256)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(AssertionError, match="k below n"):
        checked_copy(a, b, 100)
    show(np.arange(4, dtype=np.float32))
    assert "twice: [0. 2. 4. 6.]" in capsys.readouterr().out


GPU_SCRIPT = """
import numpy as np, torch, sys
import tilejit, tilejit.language as T

@tilejit.kernel(debug=True)
def unguarded(A, B):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i]  # OOB-HERE

a = torch.zeros(200, device="cuda"); b = torch.zeros(200, device="cuda")
unguarded(a, b)
torch.cuda.synchronize()
"""


@pytest.mark.gpu
def test_out_of_bounds_on_gpu_is_reported_and_stops(tmp_path):
    script = tmp_path / "oob.py"
    script.write_text(textwrap.dedent(GPU_SCRIPT))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode != 0                       # the kernel trapped
    assert "out-of-bounds access of a float32 tensor, dimension 0" in out.stdout
    assert "oob.py" in out.stdout

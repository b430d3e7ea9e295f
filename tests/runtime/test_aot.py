"""Ahead-of-time export (runtime/aot.py): save a compiled kernel, load it in a process
without Numba or llvmlite, and launch the saved specializations only."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as T

SCALE = 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@tilejit.kernel
def axpb(X, Y, b, block: T.constexpr = 256):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                Y[j] = X[j] * SCALE + b


def _save(path, block=256, dtype=np.float32):
    x = np.zeros(1000, dtype)
    handle = axpb.compile(x, x.copy(), 1.5, target="cuda", arch="sm_90a", block=block)
    handle.save(str(path))
    return handle


def test_the_file_holds_source_reads_and_each_specialization(tmp_path):
    path = tmp_path / "axpb.tjk"
    first = _save(path)
    _save(path, block=128)
    _save(path)                         # the same specialization again: replaced
    manifest = json.loads(path.read_text())
    assert manifest["name"] == "axpb" and "def axpb(X, Y, b" in manifest["source"]
    assert manifest["reads"]["SCALE"] == {"value": 3}
    assert manifest["reads"]["T"] == {"module": "tilejit.language"}
    assert [s["summary"] for s in manifest["specializations"]] == \
        ["block=128; threads=128; sm_90a", "block=256; threads=128; sm_90a"]
    assert manifest["specializations"][1]["compiled"]["ptx"] == first.ptx


def test_load_needs_neither_numba_nor_llvmlite(tmp_path):
    path = tmp_path / "axpb.tjk"
    handle = _save(path)
    code = f"""
import sys
sys.modules["numba"] = None           # importing either now fails
sys.modules["llvmlite"] = None
import numpy as np
import tilejit
k = tilejit.load({str(path)!r})
[(summary, compiled)] = k.saved
assert summary == "block=256; threads=128; sm_90a", summary
print(len(compiled.ptx))
x = np.zeros(1000, np.float32)
try:
    k(x, x.copy(), 1.5, block=64)
except (ValueError, RuntimeError) as e:
    print("refused:", e)
assert "numba" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(len(handle.ptx))
    assert lines[1].startswith("refused:")


def test_what_cannot_be_saved_or_loaded_is_a_clear_error(tmp_path):
    x = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match="compile for CUDA first"):
        axpb.compile(x, x.copy(), 1.0, target="sim").save(str(tmp_path / "s.tjk"))
    bad = tmp_path / "bad.tjk"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a saved tilejit kernel"):
        tilejit.load(str(bad))


@pytest.mark.gpu
def test_a_loaded_kernel_launches_on_the_gpu_without_numba(tmp_path):
    import torch
    path = tmp_path / "axpb.tjk"
    x = torch.randn(100_000, device="cuda")
    axpb.compile(x, torch.empty_like(x), 0.25, arch=None).save(str(path))
    code = f"""
import sys
sys.modules["numba"] = None
sys.modules["llvmlite"] = None
import torch, tilejit
k = tilejit.load({str(path)!r})
x = torch.randn(100_000, device="cuda")
y = torch.full_like(x, float("nan"))
k(x, y, 0.25)
torch.cuda.synchronize()
torch.testing.assert_close(y, x * 3 + 0.25)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


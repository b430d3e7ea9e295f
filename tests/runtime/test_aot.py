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


def test_without_a_device_the_file_holds_ptx_only_and_says_why(tmp_path, monkeypatch):
    from tilejit.runtime import cuda_driver
    monkeypatch.setattr(cuda_driver, "cuda_available", lambda: False)
    path = tmp_path / "axpb.tjk"
    _save(path)
    [entry] = json.loads(path.read_text())["specializations"]
    assert entry["compiled"]["cubin"] is None
    assert entry["compiled"]["cubin_note"] == "saved without a CUDA device: PTX only"
    assert tilejit.load(str(path)).cubins == [None]


def test_on_a_device_of_another_arch_the_file_holds_ptx_only(tmp_path, monkeypatch):
    from tilejit.runtime import cuda_driver
    monkeypatch.setattr(cuda_driver, "cuda_available", lambda: True)
    monkeypatch.setattr(cuda_driver, "device_arch", lambda ordinal=0: "sm_80")
    path = tmp_path / "axpb.tjk"
    _save(path)                                     # an sm_90a kernel
    [entry] = json.loads(path.read_text())["specializations"]
    assert entry["compiled"]["cubin"] is None
    assert "saved on a sm_80 device, the kernel is for sm_90a" in entry["compiled"]["cubin_note"]


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



@pytest.mark.gpu
def test_a_cubin_saved_on_the_gpu_is_loaded_without_compiling(tmp_path):
    """Saved on the GPU, the file holds the driver's cubin for the device's arch; a process
    without Numba or llvmlite loads the cubin (not the PTX) and gets the right result; a
    file whose cubin is for another arch falls back to its PTX."""
    import torch
    from tilejit.runtime import cuda_driver
    path = tmp_path / "axpb.tjk"
    x = torch.randn(100_000, device="cuda")
    axpb.compile(x, torch.empty_like(x), 0.25, arch=None).save(str(path))
    manifest = json.loads(path.read_text())
    [entry] = manifest["specializations"]
    arch = cuda_driver.device_arch(0)
    assert entry["compiled"]["cubin_arch"] == arch and manifest["arch"] == arch
    other = tmp_path / "other.tjk"
    entry["compiled"]["cubin_arch"] = "sm_80" if arch != "sm_80" else "sm_90a"
    other.write_text(json.dumps(manifest))
    code = f"""
import sys
sys.modules["numba"] = None
sys.modules["llvmlite"] = None
import torch, tilejit
for path in ({str(path)!r}, {str(other)!r}):
    k = tilejit.load(path)
    x = torch.randn(100_000, device="cuda")
    y = torch.full_like(x, float("nan"))
    k(x, y, 0.25)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 3 + 0.25)
    [loaded] = k._cache.values()
    print(loaded.image)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cubin", "ptx"]

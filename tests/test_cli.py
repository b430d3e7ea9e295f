"""``python -m tilejit``: info, the disk cache, compiling a kernel to PTX without a GPU."""
import os
import platform
import re
import subprocess
import sys
from importlib import metadata

import pytest

import tilejit
from tilejit.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, cache):
    env = dict(os.environ, TILEJIT_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tilejit", *args], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    return out.returncode, out.stdout, out.stderr


def _installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def test_info_lists_versions_the_driver_devices_and_the_cache(tmp_path):
    rc, out, err = _run("info", cache=tmp_path)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"tilejit {tilejit.__version__}"
    assert lines[1].startswith(f"Python {platform.python_version()} (")
    # real versions (importlib.metadata), not file fingerprints
    for name in ("numba", "llvmlite", "torch"):
        version = _installed(name)
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", version), version
        assert f"{name} {version}" in lines, out
    bindings = _installed("cuda-bindings")
    if bindings == "not installed":
        bindings = _installed("cuda-python")
    assert f"cuda-bindings {bindings}" in lines, out
    driver = next(line for line in lines if line.startswith("CUDA driver: "))
    from tilejit.runtime import cuda_driver
    version = cuda_driver.driver_version()
    assert driver == "CUDA driver: " + (f"{version[0]}.{version[1]}" if version
                                        else "no driver")
    assert re.fullmatch(r"CUDA driver: (\d+\.\d+|no driver)", driver)
    if cuda_driver.cuda_available():
        assert f"CUDA devices: {cuda_driver.device_count()}" in lines
        assert f"{cuda_driver.device_name(0)}, default arch {cuda_driver.device_arch(0)}" \
            in out
    else:
        assert "CUDA devices: none" in out and "simulator" in out
    assert f"disk cache: {tmp_path} (0 files, 0.0 MB)" in lines
    assert ":__init__.py:" not in out      # no stat fingerprints


def test_info_says_what_is_missing(monkeypatch, tmp_path):
    from tilejit import cli
    from tilejit.runtime import cuda_driver
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "_DISTRIBUTIONS", cli._DISTRIBUTIONS +
                        (("nothing", ("tilejit-no-such-distribution",)),))
    monkeypatch.setattr(cuda_driver, "driver_version", lambda: None)
    monkeypatch.setattr(cuda_driver, "cuda_available", lambda: False)
    lines = cli.info().splitlines()
    assert "nothing not installed" in lines
    assert "CUDA driver: no driver" in lines
    assert any(line.startswith("CUDA devices: none (no CUDA driver)") for line in lines)
    assert cli.installed_version("tilejit-no-such-distribution", "numba") == \
        metadata.version("numba")


def test_compile_writes_ptx_and_the_cache_lists_and_clears_it(tmp_path):
    ptx = tmp_path / "matmul.ptx"
    rc, out, err = _run("compile", "examples/gemm.py::matmul", "--arch", "sm_90a",
                        "--signature", "float16[4096,4096] float16[4096,4096] "
                        "float32[4096,4096]", "--const", "block_K=64", "--out", str(ptx),
                        "--dump", str(tmp_path / "dump"), cache=tmp_path / "cache")
    assert rc == 0, err
    text = ptx.read_text()
    assert ".target sm_90a" in text and "wgmma.mma_async" in text
    assert any(name.endswith("kernel.ptx") for _, _, files in os.walk(tmp_path / "dump")
               for name in files)
    rc, out, _ = _run("compile", "examples/vector_add.py::vector_add", "--arch", "sm_80",
                      "--signature", "float32[1000] float32[1000] float32[1000]",
                      cache=tmp_path / "cache")
    assert rc == 0 and ".target sm_80" in out
    rc, out, _ = _run("cache", "list", cache=tmp_path / "cache")
    assert rc == 0 and "vector_add" in out
    rc, out, _ = _run("cache", "clear", cache=tmp_path / "cache")
    assert rc == 0 and "removed" in out
    rc, out, _ = _run("cache", "list", cache=tmp_path / "cache")
    assert "empty" in out


@pytest.mark.parametrize("argv,message", [
    (["compile", "examples/gemm.py", "--signature", "x"], "expected FILE::KERNEL"),
    (["compile", "nowhere.py::k", "--signature", "x"], "no such file"),
    (["compile", "examples/gemm.py::nope", "--signature", "x"], "its kernels: matmul"),
    (["compile", "examples/gemm.py::matmul", "--signature", "half[4,4]"], "unknown dtype"),
    (["compile", "examples/gemm.py::matmul", "--signature", "f[1"], "expected dtype["),
    (["compile", "examples/gemm.py::matmul", "--signature", "float16[64,64]"], "argument"),
])
def test_bad_command_lines_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
